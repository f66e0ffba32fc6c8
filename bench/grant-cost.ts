// What one grant entry costs redis-server: grant.lua run alone on a real redis-server, with the calls the gateway sends
// (scripts.ts grantKeys/grantArgs: one holder, entries of one request of cost 1, a block and a reserve wanted, the
// config's ban policy), on two kinds of key — cold (never seen: an empty hash) and warm (made by the script under test,
// then a full minute of buckets, a day ring, two other holders' reserves and blocks, the caller's block of the last
// second given back as an adjustment) — at 1, 5 and 20 entries per call. Measured per entry: redis-server's CPU (/proc/PID/schedstat of its
// main thread, in ns: the script, the socket and the event loop; time on the CPU only, so a loaded machine's waits do not
// count), the script's own time (INFO commandstats, cmdstat_evalsha usec after CONFIG RESETSTAT: wall time, so a loaded
// machine's preemptions do) and the commands the script runs inside Redis (commandstats counts them too). This checkout's
// script and a baseline's (`git show BENCH_GRANT_BASELINE:src/gateway/limiter/lua/grant.lua`, default main) run
// interleaved, order alternating by round, on the same server; the table is the medians of the rounds.
//   npm run bench:grant   (BENCH_GRANT_ROUNDS 7, BENCH_GRANT_ENTRIES 2000 per measure, BENCH_GRANT_BASELINE main,
//   BENCH_GRANT_CPU the core to pin redis-server to, BENCH_GRANT_OUT a JSON file for the rounds)
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { GRANT, grantArgs, grantKeys, type GrantEntry } from '../src/gateway/limiter/redis/scripts.js'
import { REPO_ROOT, startRedis, stop } from './lib/processes.js'
import { parseCommandStats } from './lib/commandstats.js'
import { median } from './lib/load.js'
import { mainThreadCpuMicros } from './lib/proc-cpu.js'

const ROUNDS = Number(process.env.BENCH_GRANT_ROUNDS ?? 7)
const ENTRIES_PER_MEASURE = Number(process.env.BENCH_GRANT_ENTRIES ?? 2000)
const BASELINE = process.env.BENCH_GRANT_BASELINE ?? 'main'
const PINNED_CPU = process.env.BENCH_GRANT_CPU
/** Calls in flight at once (the gateway's shards pipeline theirs too). */
const IN_FLIGHT = 8
/** Entries measured between two seedings of warm keys (well within a second). */
const BATCH_ENTRIES = 100
const SIZES = [1, 5, 20] as const
const KINDS = ['cold', 'warm'] as const
const HOLDER = 'bench-holder'
const BAN = { threshold: 30, windowSeconds: 60, durationSeconds: 900, maxDurationSeconds: 86_400 }
const MINUTE_MS = 1000
const DAY_BUCKET_MS = 900_000
const MINUTE_SLOTS = 61
const DAY_SLOTS = 97

type Kind = typeof KINDS[number]
interface Script { readonly name: string, readonly sha: string }
interface Measure { readonly evalUsPerEntry: number, readonly cpuUsPerEntry: number, readonly innerPerEntry: Record<string, number> }

/** A bucket field's value: tag (bucket mod `mod`) × scale + units, as grant.lua stores it. */
function bucketValue (bucket: number, units: number, mod: number, scale: number): string {
  return String((bucket % mod) * scale + units)
}

/**
 * Keys `prefix`from..to-1 as seen every second for the last minute, with their day rings: each made first by a call of
 * the script under test (so its fields sit in the order that script writes a new hash in: a small hash is a listpack,
 * searched from its start), then its minute's history written over it (HMSET, pipelined).
 */
async function seedWarm (client: Redis, script: Script, prefix: string, from: number, to: number, nowMs: number): Promise<void> {
  const made = client.pipeline()
  for (let index = from; index < to; index++) {
    const entries = [entryOf(`${prefix}${index}}`, 'cold', nowMs)]
    const keys = grantKeys(entries)
    made.evalsha(script.sha, keys.length, ...keys, ...grantArgs(HOLDER, entries))
  }
  await made.exec()
  const minute = Math.floor(nowMs / MINUTE_MS)
  const day = Math.floor(nowMs / DAY_BUCKET_MS)
  const fields: string[] = []
  let units = 0
  for (let bucket = minute - MINUTE_SLOTS; bucket < minute; bucket++) {
    fields.push(String(bucket % MINUTE_SLOTS), bucketValue(bucket, 3, 2 ** 20, 2 ** 32))
    if (bucket > minute - MINUTE_SLOTS) units += 3
  }
  const dayFields: string[] = []
  for (let bucket = day - DAY_SLOTS + 1; bucket < day; bucket++) dayFields.push(String(bucket % DAY_SLOTS), bucketValue(bucket, 50, 2 ** 13, 2 ** 40))
  const until = nowMs + 60_000
  fields.push('t', String(minute - 1), 'n', String(units), 'o', String(minute - MINUTE_SLOTS),
    'D', String(day), 'N', String(50 * (DAY_SLOTS - 2) + 200), 'O', String(day - DAY_SLOTS + 1), 'c', '200',
    'r', `other-a,5,${until};other-b,4,${until}`,
    'p', `other-a,${minute - 1},3;other-b,${minute - 1},2;${HOLDER},${minute - 1},2`,
    'k', '', 'x', String((day + DAY_SLOTS) * DAY_BUCKET_MS))
  const pipeline = client.pipeline()
  for (let index = from; index < to; index++) {
    pipeline.hmset(`${prefix}${index}}`, ...fields)
    pipeline.hmset(`${prefix}${index}}:d`, ...dayFields)
  }
  await pipeline.exec()
}

/** One entry as calls.ts builds it: one request, a block and a reserve wanted; warm: last second's block given back. */
function entryOf (key: string, kind: Kind, nowMs: number): GrantEntry {
  const minute = Math.floor(nowMs / MINUTE_MS)
  const day = Math.floor(nowMs / DAY_BUCKET_MS)
  return {
    key, minuteLimit: 1000, dayLimit: 100_000, monthLimit: 0, monthSoft: false,
    requests: 1, cost: 1, extra: 4, reserve: 10, write: true,
    blocksBucket: kind === 'warm' ? minute - 1 : 0, blocks: 0, waited: 0, ban: BAN,
    adjustments: kind === 'warm' ? [{ minute: minute - 1, day, month: 0, delta: -1 }] : []
  }
}

/** Runs ENTRIES_PER_MEASURE entries of `kind` in calls of `size` with `script`, on fresh keys, BATCH_ENTRIES at a time. */
async function measure (client: Redis, pid: number, script: Script, kind: Kind, size: number, round: number): Promise<Measure> {
  const calls = Math.ceil(ENTRIES_PER_MEASURE / size)
  const batchCalls = Math.max(1, Math.floor(BATCH_ENTRIES / size))
  const prefix = `rl:{${script.name}-${kind}-${size}-${round}-`
  let cpu = 0
  const counted = new Map<string, { calls: number, usec: number }>()
  for (let first = 0; first < calls; first += batchCalls) {
    const last = Math.min(calls, first + batchCalls)
    // Warm keys are seeded just before their batch, so each call finds the last second's bucket newest, whatever the
    // batches before took; the seeding's commands (a call each, HMSET) are left out of the counts (RESETSTAT after it).
    if (kind === 'warm') await seedWarm(client, script, prefix, first * size, last * size, Date.now())
    await client.config('RESETSTAT')
    const cpuBefore = mainThreadCpuMicros(pid)
    let next = first
    const worker = async (): Promise<void> => {
      for (let call = next++; call < last; call = next++) {
        const entries: GrantEntry[] = []
        for (let index = 0; index < size; index++) entries.push(entryOf(`${prefix}${call * size + index}}`, kind, Date.now()))
        const keys = grantKeys(entries)
        await client.evalsha(script.sha, keys.length, ...keys, ...grantArgs(HOLDER, entries))
      }
    }
    await Promise.all(Array.from({ length: IN_FLIGHT }, worker))
    cpu += mainThreadCpuMicros(pid) - cpuBefore
    for (const [name, stat] of parseCommandStats(await client.info('commandstats'))) {
      const sum = counted.get(name) ?? { calls: 0, usec: 0 }
      counted.set(name, { calls: sum.calls + stat.calls, usec: sum.usec + stat.usec })
    }
  }
  const entries = calls * size
  const innerPerEntry: Record<string, number> = {}
  for (const [name, stat] of counted) if (!['evalsha', 'info'].includes(name) && !name.startsWith('config')) innerPerEntry[name] = stat.calls / entries
  return { evalUsPerEntry: (counted.get('evalsha')?.usec ?? 0) / entries, cpuUsPerEntry: cpu / entries, innerPerEntry }
}

async function main (): Promise<void> {
  const baselineLua = execFileSync('git', ['show', `${BASELINE}:src/gateway/limiter/lua/grant.lua`], { cwd: REPO_ROOT, encoding: 'utf8' })
  const dir = mkdtempSync(join(tmpdir(), 'petstore-grant-cost-'))
  const redis = await startRedis(dir)
  const pid = redis.child.pid!
  if (PINNED_CPU !== undefined) execFileSync('taskset', ['-pc', PINNED_CPU, String(pid)])
  const client = new Redis(redis.port, '127.0.0.1')
  try {
    const scripts: Script[] = [
      { name: 'before', sha: String(await client.script('LOAD', baselineLua)) },
      { name: 'after', sha: String(await client.script('LOAD', GRANT.lua)) }
    ]
    if (scripts[0]!.sha !== createHash('sha1').update(baselineLua).digest('hex')) throw new Error('grant-cost: SHA mismatch')
    const results = new Map<string, Measure[]>()
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? scripts : [...scripts].reverse()
      for (const kind of KINDS) {
        for (const size of SIZES) {
          for (const script of order) {
            const result = await measure(client, pid, script, kind, size, round)
            const name = `${kind} ${size} ${script.name}`
            results.set(name, [...(results.get(name) ?? []), result])
          }
        }
      }
      await client.flushall()
      process.stderr.write(`round ${round + 1}/${ROUNDS} done (load ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')})\n`)
    }
    const lines = [
      `grant.lua per entry, medians of ${ROUNDS} interleaved rounds of ${ENTRIES_PER_MEASURE} entries (baseline: ${BASELINE})`,
      '| key | entries/call | redis-server CPU µs/entry before → after | paired after − before (rounds lower) | script µs/entry before → after | commands inside the script per entry before → after |',
      '|---|---:|---:|---:|---:|---|'
    ]
    for (const kind of KINDS) {
      for (const size of SIZES) {
        const before = results.get(`${kind} ${size} before`)!
        const after = results.get(`${kind} ${size} after`)!
        const inner = (runs: Measure[]): string => Object.entries(runs[0]!.innerPerEntry).sort(([left], [right]) => left.localeCompare(right))
          .map(([name, count]) => `${name} ${count.toFixed(2)}`).join(', ')
        const evalBefore = median(before.map((run) => run.evalUsPerEntry))
        const evalAfter = median(after.map((run) => run.evalUsPerEntry))
        const cpuBefore = median(before.map((run) => run.cpuUsPerEntry))
        const cpuAfter = median(after.map((run) => run.cpuUsPerEntry))
        const paired = after.map((run, round) => run.cpuUsPerEntry - before[round]!.cpuUsPerEntry)
        const lower = paired.filter((difference) => difference < 0).length
        lines.push(`| ${kind} | ${size} | ${cpuBefore.toFixed(1)} → ${cpuAfter.toFixed(1)} | ${median(paired).toFixed(1)} (${lower} of ${paired.length}) | ${evalBefore.toFixed(1)} → ${evalAfter.toFixed(1)} | ${inner(before)} → ${inner(after)} |`)
      }
    }
    process.stdout.write(lines.join('\n') + '\n')
    if (process.env.BENCH_GRANT_OUT !== undefined) writeFileSync(process.env.BENCH_GRANT_OUT, JSON.stringify(Object.fromEntries(results), null, 1))
  } finally {
    client.disconnect()
    await stop(redis.child)
    rmSync(dir, { recursive: true, force: true })
  }
}

await main()
