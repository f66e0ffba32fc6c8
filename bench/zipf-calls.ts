// Script calls per decision on the Zipf workload, measured so that machine load cannot move them much: the real
// RedisStore of this checkout and of a baseline checkout (BENCH_BASELINE, e.g. a `git archive` of the code before the
// outage policy, with node_modules) driven in-process — no HTTP, no wrk — by the same Zipf sequence (bench/lib/zipf.ts,
// seed 21), from the same number of closed-loop clients paced to a fixed total rate (each client sends its next request
// at its next slot, after its answer), against a fresh redis-server each run. Counted: EVALSHA per decision (INFO
// commandstats) and, from a wrapper around the store's port, the grant entries of each call by what they carry.
// Beside them, redis-server's own CPU over the same decisions (INFO cpu). Runs alternate (this, baseline, …, then the
// reverse order), each in a child process; the table is the medians.
//   BENCH_BASELINE=/tmp/outage-bl node --import ./src/ts-resolve.ts bench/zipf-calls.ts   (or a comma list of checkouts)
//   ZIPF_CALLS_SECONDS (default 6), ZIPF_CALLS_RATE (req/s, default 2500; 0: unpaced, 2,500 × seconds requests),
//   ZIPF_CALLS_CLIENTS (50), ZIPF_CALLS_ROUNDS (3), ZIPF_CALLS_WORK_US (fixed CPU per request either side of the limiter, 0)
//   ZIPF_CALLS_SHAPE=keys: 1,000 keys in turn (the bench's other long tail) instead of the Zipf draw
//   ZIPF_CALLS_RECORD (a file: the grant calls of the run, for bench/grant-lua-profile.ts)
//   ZIPF_CALLS_TIMEOUT_MS (the store's call timeout; unset: its default — on a loaded machine a call late past it
//   takes the shard down and the run ends on an outage refusal, so a CPU measure there sets it higher, e.g. 2000)
// A run that fails is run once more (said on stderr); a second failure ends the bench.
import { execFile } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { startScratchRedis } from './lib/scratch-redis.js'
import { median } from './lib/load.js'
import { taskset } from './lib/proc-cpu.js'
import { sourceLoaderArgs } from './lib/source-loader.js'
import { DEFAULT_ZIPF_CONSUMERS, DEFAULT_ZIPF_EXPONENT, DEFAULT_ZIPF_SEED, DEFAULT_ZIPF_SEQUENCE_LENGTH, zipfSequence } from './lib/zipf.js'
import { DEFAULT_ROTATING_KEYS } from './lib/workloads.js'
import type { RecordedCall } from './lib/recorded-calls.js'

const run = promisify(execFile)
const HERE = resolve(import.meta.dirname, '..')
/** ZIPF_CALLS_SHAPE=keys: the bench's other long tail, 1,000 keys in turn, instead of the Zipf draw. */
const KEYS_IN_TURN = process.env.ZIPF_CALLS_SHAPE === 'keys'
/** Limits no run reaches (as bench/run.ts's plans). */
const LIMITS = { perMinute: 1_000_000_000, perDay: 1_000_000_000_000 }

/** What one run measured. */
interface RunResult {
  variant: string
  decisions: number
  seconds: number
  evalsha: number
  time: number
  hmget: number
  /** Grant calls the port sent, their entries, entries asking for requests, entries settling only (give-backs, write-backs), entries changing only a reserve. */
  calls: number
  entries: number
  asking: number
  settling: number
  reserveOnly: number
  /** Calls whose every entry asks for no request. */
  callsWithoutRequests: number
  /** This process's CPU (user + system, µs) over the decisions: the store's own cost, with the fixed work. */
  cpuMicros: number
  /** Of cpuMicros, the system's (the kernel's work for this process: sockets, timers, wake-ups). */
  cpuSystemMicros: number
  /** redis-server's CPU (user + system, µs, INFO cpu) over the same decisions: the scripts, the sockets, its event loop. */
  redisCpuMicros: number
  /** Every command Redis counted over the run (INFO commandstats: the scripts' inner calls included), by name. */
  commands: Record<string, number>
}

/** The store API both checkouts share (the baseline has no outage allowance option: ignored there). */
interface StoreModule { createRedisStore: (client: Redis, opts: Record<string, unknown>) => { consume: (id: string, ask: unknown) => Promise<{ outcome: string }>, settled: (ms: number) => Promise<void>, close: () => Promise<void> } }
interface PortModule { ioredisPort: (client: Redis) => { run: (script: unknown, keys: readonly string[], args: readonly string[]) => Promise<unknown> } & Record<string, unknown>, nodeRuntime: () => unknown }

async function commandCalls (port: number): Promise<Record<string, number>> {
  const { stdout } = await run('redis-cli', ['-p', String(port), 'INFO', 'commandstats'])
  const calls: Record<string, number> = {}
  for (const match of stdout.matchAll(/cmdstat_(\w+):calls=(\d+)/g)) calls[match[1]!] = Number(match[2])
  return calls
}

/** redis-server's CPU so far (user + system of the whole process, µs), from INFO cpu. */
async function redisCpuMicros (client: Redis): Promise<number> {
  const info = await client.info('cpu')
  const seconds = (name: string): number => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)?.[1] ?? Number.NaN)
  return Math.round((seconds('used_cpu_user') + seconds('used_cpu_sys')) * 1e6)
}

/** One run in this process: `root`'s store, a fresh Redis on `redisPort`. */
/** Spins for `micros` µs: a request's own CPU, the same in every run. */
function busy (micros: number): void {
  if (micros <= 0) return
  const until = performance.now() + micros / 1000
  while (performance.now() < until) { /* spin */ }
}

async function child (root: string, redisPort: number, seconds: number, rate: number, clients: number, workMicros: number): Promise<RunResult> {
  const storeModule = await import(join(root, 'src/gateway/limiter/redis/store.ts')) as StoreModule
  const portModule = await import(join(root, 'src/gateway/limiter/redis/ioredis-port.ts')) as PortModule
  const client = new Redis({ port: redisPort, host: '127.0.0.1', lazyConnect: false, enableOfflineQueue: true })
  await client.set('rl:{#epoch}', 'deployed,0')
  const counted = { calls: 0, entries: 0, asking: 0, settling: 0, reserveOnly: 0, callsWithoutRequests: 0 }
  // ZIPF_CALLS_RECORD: every grant call (its time, KEYS, ARGV) to a JSON file, for bench/grant-lua-profile.ts to replay.
  const recordTo = process.env.ZIPF_CALLS_RECORD
  const recorded: RecordedCall[] = []
  const port = portModule.ioredisPort(client)
  const wrapped = {
    ...port,
    run (script: unknown, keys: readonly string[], args: readonly string[]) {
      if (keys.length > 1) {
        if (recordTo !== undefined) recorded.push({ at: Date.now(), keys, args })
        counted.calls++
        let asking = 0
        for (let position = 1; position < args.length; position += 3) {
          counted.entries++
          const fields = args[position]!.split(' ')
          if (Number(fields[3]) > 0) { counted.asking++; asking++ } else if (args[position + 2] !== '') counted.settling++
          else counted.reserveOnly++
        }
        if (asking === 0) counted.callsWithoutRequests++
      }
      return port.run(script, keys, args)
    }
  }
  const timeoutMs = process.env.ZIPF_CALLS_TIMEOUT_MS === undefined ? {} : { timeoutMs: Number(process.env.ZIPF_CALLS_TIMEOUT_MS) }
  const store = storeModule.createRedisStore(client, { port: wrapped, runtime: portModule.nodeRuntime(), description: { kind: 'standalone' }, holder: 'bench', policy: 'local', allowance: { share: 0.1, processes: 1 }, ...timeoutMs })
  await store.settled(3_000)
  await client.config('RESETSTAT')
  const order = KEYS_IN_TURN
    ? Array.from({ length: DEFAULT_ZIPF_SEQUENCE_LENGTH }, (_, index) => index % DEFAULT_ROTATING_KEYS)
    : zipfSequence({ consumers: DEFAULT_ZIPF_CONSUMERS, exponent: DEFAULT_ZIPF_EXPONENT, length: DEFAULT_ZIPF_SEQUENCE_LENGTH, seed: DEFAULT_ZIPF_SEED })
  // Unpaced (rate 0): as many requests as a paced run of the same length at 2,500 req/s, each client's next at once.
  const total = Math.min(order.length, Math.round(seconds * (rate > 0 ? rate : 2_500)))
  const ask = { limits: LIMITS, ban: null, cost: 1, monthLimit: 0, overage: true }
  const slotMs = rate > 0 ? 1000 * clients / rate : 0
  let nextIndex = 0
  let decisions = 0
  const redisBefore = await redisCpuMicros(client)
  // bench/lib/heap-sampling.ts preloaded to start at SIGUSR2 (bench/zipf-calls-profile.ts PROFILE_HEAP=1): the decisions' allocations only.
  if (process.env.HEAP_SAMPLING_ON === 'SIGUSR2') process.kill(process.pid, 'SIGUSR2')
  const started = performance.now()
  const cpuBefore = process.cpuUsage()
  async function loop (clientIndex: number): Promise<void> {
    let slot = 0
    for (;;) {
      const index = nextIndex++
      if (index >= total) return
      busy(workMicros) // what the gateway does before the limiter (parse, route, auth), as fixed CPU
      const result = await store.consume(`key-${order[index]!}`, ask)
      busy(workMicros) // and after it (proxy, reply)
      if (result.outcome !== 'ok') throw new Error(`unexpected ${result.outcome}`)
      decisions++
      slot++
      const due = started + (clientIndex / clients + slot) * slotMs
      const wait = due - performance.now()
      await new Promise((done) => { if (wait > 0) setTimeout(done, wait); else setImmediate(done) })
    }
  }
  await Promise.all(Array.from({ length: clients }, (_, clientIndex) => loop(clientIndex)))
  const elapsed = (performance.now() - started) / 1000
  const cpu = process.cpuUsage(cpuBefore)
  const redisUsed = await redisCpuMicros(client) - redisBefore
  if (recordTo !== undefined) writeFileSync(recordTo, JSON.stringify(recorded))
  await new Promise((done) => setTimeout(done, 50))
  const calls = await commandCalls(redisPort)
  await store.close()
  return { variant: root, decisions, seconds: elapsed, evalsha: calls.evalsha ?? 0, time: calls.time ?? 0, hmget: calls.hmget ?? 0, ...counted, cpuMicros: cpu.user + cpu.system, cpuSystemMicros: cpu.system, redisCpuMicros: redisUsed, commands: calls }
}

async function main (): Promise<void> {
  const [mode, root, redisPort] = process.argv.slice(2)
  const seconds = Number(process.env.ZIPF_CALLS_SECONDS ?? 6)
  const rate = Number(process.env.ZIPF_CALLS_RATE ?? 2_500)
  const clients = Number(process.env.ZIPF_CALLS_CLIENTS ?? 50)
  const workMicros = Number(process.env.ZIPF_CALLS_WORK_US ?? 0)
  if (mode === '--child') {
    process.stdout.write(JSON.stringify(await child(root!, Number(redisPort), seconds, rate, clients, workMicros)) + '\n')
    process.exit(0)
  }
  const rounds = Number(process.env.ZIPF_CALLS_ROUNDS ?? 3)
  const loadBefore = loadavg()
  // BENCH_BASELINE may name several checkouts, comma-separated (the code before a change, and an older one).
  const variants = [HERE, ...(process.env.BENCH_BASELINE ?? '').split(',').filter((dir) => dir.trim() !== '').map((dir) => resolve(dir.trim()))]
  const results = new Map<string, RunResult[]>(variants.map((variant) => [variant, []]))
  const bin = taskset()
  for (let round = 0; round < rounds; round++) {
    for (const variant of round % 2 === 0 ? variants : [...variants].reverse()) { // the order reversed every other round
      for (let attempt = 1; ; attempt++) {
        const redis = await startScratchRedis('zipf-calls')
        try {
          const command = [process.execPath, ...sourceLoaderArgs(join(variant, 'src', 'gateway', 'server.ts')), join(HERE, 'bench/zipf-calls.ts'), '--child', variant, String(redis.port)]
          const { stdout } = bin === null ? await run(command[0]!, command.slice(1), { cwd: HERE, maxBuffer: 1 << 20 }) : await run(bin, ['-c', '0', ...command], { cwd: HERE, maxBuffer: 1 << 20 })
          const result = JSON.parse(stdout.trim().split('\n').pop()!) as RunResult
          results.get(variant)!.push(result)
          process.stderr.write(`round ${round + 1} ${variant}: ${JSON.stringify(result)}\n`)
          break
        } catch (err) {
          if (attempt >= 2) throw err
          process.stderr.write(`round ${round + 1} ${variant}: the run failed (${(err as Error).message.split('\n').find((line) => line.includes('Error:')) ?? 'see above'}), run again\n`)
        } finally {
          await redis.stop()
        }
      }
    }
  }
  const per = (list: RunResult[], pick: (result: RunResult) => number): string => median(list.map((result) => pick(result) / result.decisions)).toFixed(4)
  const pacing = rate > 0 ? `paced to ${rate} req/s, ${seconds} s a run` : `unpaced, ${Math.round(seconds * 2_500)} requests a run`
  const load = (averages: number[]): string => averages.map((average) => average.toFixed(2)).join(' ')
  console.log(`${KEYS_IN_TURN ? `${DEFAULT_ROTATING_KEYS} keys in turn` : `Zipf s = ${DEFAULT_ZIPF_EXPONENT} (seed ${DEFAULT_ZIPF_SEED})`}, ${clients} closed-loop clients ${pacing}, ${workMicros} µs of fixed CPU per request either side of the limiter, ${rounds} interleaved rounds; medians per decision; load average (1, 5, 15 min) ${load(loadBefore)} before, ${load(loadavg())} after`)
  console.log('| checkout | decisions | req/s | EVALSHA | TIME | HMGET | entries | asking | settling only | reserve only | calls with no request | decisions per call | process CPU µs per decision | of it system | Redis CPU µs per decision |')
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
  for (const [variant, list] of results) {
    console.log(`| ${variant} | ${median(list.map((result) => result.decisions))} | ${median(list.map((result) => result.decisions / result.seconds)).toFixed(0)} | ${per(list, (result) => result.evalsha)} | ${per(list, (result) => result.time)} | ${per(list, (result) => result.hmget)} | ${per(list, (result) => result.entries)} | ${per(list, (result) => result.asking)} | ${per(list, (result) => result.settling)} | ${per(list, (result) => result.reserveOnly)} | ${per(list, (result) => result.callsWithoutRequests)} | ${median(list.map((result) => result.decisions / result.evalsha)).toFixed(2)} | ${per(list, (result) => result.cpuMicros)} | ${per(list, (result) => result.cpuSystemMicros)} | ${per(list, (result) => result.redisCpuMicros)} |`)
  }
}

await main()
