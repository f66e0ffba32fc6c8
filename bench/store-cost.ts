// `node --import tsx bench/store-cost.ts [baseline-dir]`: the limiter store's own cost per decision,
// without HTTP around it — process CPU (this process's, from process.cpuUsage) and redis-server CPU
// (from /proc) per `consume`, with STORE_COST_KEYS keys used in turn (default 1,000: the cold-key
// path, one script call per decision) and STORE_COST_CONCURRENCY calls in flight. With a baseline
// checkout (`git archive` of an older commit, node_modules linked in) its store runs in the same
// process, rounds interleaved, so neighbours' load on a shared machine hits both alike.
// Each round also counts the store's failed calls (its health's errors, where the checkout has
// one): on a healthy Redis every one is a false timeout, a decision Redis did not make.
// Per decision it also reports the script calls and the Redis commands (the scripts' inner ones
// included) it cost, and how many decisions one script call carried (decide-batch takes a turn's).
// Env: STORE_COST_CALLS [20000 per round] STORE_COST_ROUNDS [5] STORE_COST_LEASES [on]
// STORE_COST_REDIS_CPU [unset: redis-server runs where this process may; a CPU number: pinned there
// with taskset, so `taskset -c 0 node …` with STORE_COST_REDIS_CPU=1 keeps the two apart]
// STORE_COST_BATCH [unset: the store's default; a number: decisions per script call at most
// (storeBatchMax), for this checkout only].
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { LimiterStore } from '../src/gateway/limiter/store.js'
import { median } from './lib/load.js'
import { cpuMicros } from './lib/proc-cpu.js'
import { REPO_ROOT, type RedisServer, startRedis, stopAll } from './lib/processes.js'

type StoreSettings = { redisUrl: string, storeLeases?: boolean, storeBatchMax?: number }
/** A checkout's createStore: today's gives the store and its health, an older one the store alone. */
type CreateStore = (settings: StoreSettings) => Promise<LimiterStore | { store: LimiterStore, health?: { errors: () => number } }>

interface Measured {
  store: LimiterStore
  /** Failed calls so far (0 when the checkout's store reports none). */
  errors: () => number
}

const LIMITS = { perMinute: 1_000_000_000, perDay: 1_000_000_000_000 }

async function load (root: string): Promise<(settings: StoreSettings) => Promise<Measured>> {
  const mod = await import(pathToFileURL(join(root, 'src', 'gateway', 'limiter', 'create-store.ts')).href) as { createStore: CreateStore }
  return async (settings) => {
    const created = await mod.createStore(settings)
    if (!('store' in created)) return { store: created, errors: () => 0 }
    const health = created.health
    return { store: created.store, errors: () => health?.errors() ?? 0 }
  }
}

interface Round {
  processUs: number
  redisUs: number
  callsPerSecond: number
  scriptUs: number
  commands: number
  /** Script calls (EVALSHA) per decision, and Redis commands (inner ones included) per decision. */
  scriptCalls: number
  commandsPerDecision: number
  errors: number
}

/** EVALSHA µs per call, commands per EVALSHA (the script's inner calls included), and both totals since the last reset. */
async function scriptStats (cli: (...args: string[]) => Promise<string>): Promise<{ scriptUs: number, commands: number, calls: number, total: number }> {
  const info = await cli('INFO', 'commandstats')
  const evalsha = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(info)
  const calls = Number(evalsha?.[1] ?? 0)
  let commands = 0
  for (const m of info.matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)) if (m[1] !== 'info' && m[1] !== 'config|resetstat') commands += Number(m[2])
  return { scriptUs: calls === 0 ? 0 : Number(evalsha?.[2] ?? 0) / calls, commands: calls === 0 ? 0 : commands / calls, calls, total: commands }
}

async function round ({ store, errors }: Measured, prefix: string, keys: number, calls: number, concurrency: number, redis: RedisServer): Promise<Round> {
  const redisPid = redis.child.pid
  await redis.cli('CONFIG', 'RESETSTAT')
  const errorsBefore = errors()
  let next = 0
  const cpu = process.cpuUsage()
  const redisBefore = cpuMicros(redisPid)
  const start = performance.now()
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < calls) {
      const i = next++
      await store.consume(`${prefix}-${i % keys}`, LIMITS, null)
      // A new macrotask per decision, as each HTTP request is one.
      await new Promise((resolve) => setImmediate(resolve))
    }
  }))
  const elapsed = performance.now() - start
  const used = process.cpuUsage(cpu)
  const redisUs = (cpuMicros(redisPid) - redisBefore) / calls
  const stats = await scriptStats(redis.cli)
  return {
    processUs: (used.user + used.system) / calls,
    redisUs,
    callsPerSecond: calls / elapsed * 1000,
    scriptUs: stats.scriptUs,
    commands: stats.commands,
    scriptCalls: stats.calls / calls,
    commandsPerDecision: stats.total / calls,
    errors: errors() - errorsBefore
  }
}

async function main (): Promise<void> {
  const keys = Number(process.env.STORE_COST_KEYS ?? 1000)
  const calls = Number(process.env.STORE_COST_CALLS ?? 20_000)
  const rounds = Number(process.env.STORE_COST_ROUNDS ?? 5)
  const concurrency = Number(process.env.STORE_COST_CONCURRENCY ?? 50)
  const leases = process.env.STORE_COST_LEASES !== 'off'
  const work = mkdtempSync(join(tmpdir(), 'petstore-store-cost-'))
  try {
    const variants: Array<{ name: string, root: string }> = [{ name: 'this checkout', root: REPO_ROOT }]
    if (process.argv[2] !== undefined) variants.push({ name: `baseline ${process.argv[2]}`, root: process.argv[2] })
    const redis = await startRedis(work)
    const redisCpu = process.env.STORE_COST_REDIS_CPU
    if (redisCpu !== undefined && redis.child.pid !== undefined) execFileSync('taskset', ['-pc', redisCpu, String(redis.child.pid)], { stdio: 'ignore' })
    const batch = process.env.STORE_COST_BATCH === undefined ? {} : { storeBatchMax: Number(process.env.STORE_COST_BATCH) }
    const stores = await Promise.all(variants.map(async (v, i) => await (await load(v.root))({ redisUrl: redis.url, storeLeases: leases, ...(i === 0 ? batch : {}) })))
    for (const [i, s] of stores.entries()) await round(s, `v${i}`, keys, Math.min(calls, 2_000), concurrency, redis)
    const results = variants.map(() => [] as Round[])
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? stores.map((_, i) => i) : stores.map((_, i) => stores.length - 1 - i)
      for (const i of order) results[i]?.push(await round(stores[i]!, `v${i}`, keys, calls, concurrency, redis))
    }
    process.stdout.write(`${keys} keys, ${calls} calls × ${rounds} rounds, ${concurrency} in flight, leases ${leases ? 'on' : 'off'}; medians (per-round in brackets)\n`)
    variants.forEach((v, i) => {
      const rs = results[i] ?? []
      const f = (pick: (x: Round) => number): string => `${median(rs.map(pick)).toFixed(1)} [${rs.map((x) => pick(x).toFixed(1)).join(' ')}]`
      const failed = rs.reduce((sum, x) => sum + x.errors, 0)
      const g = (pick: (x: Round) => number): string => `${median(rs.map(pick)).toFixed(3)} [${rs.map((x) => pick(x).toFixed(3)).join(' ')}]`
      process.stdout.write(`${v.name}: process ${f((x) => x.processUs)} µs/call · Redis ${f((x) => x.redisUs)} µs/call · ${f((x) => x.callsPerSecond)} calls/s · script ${f((x) => x.scriptUs)} µs/EVALSHA · ${f((x) => x.commands)} commands/EVALSHA · ` +
        `${g((x) => x.scriptCalls)} script calls/decision · ${g((x) => x.commandsPerDecision)} commands/decision · ` +
        `failed calls ${failed} of ${rs.length * calls} (${(failed / (rs.length * calls) * 100_000).toFixed(0)} per 100,000) [${rs.map((x) => x.errors).join(' ')}]\n`)
    })
    await Promise.all(stores.map(async (s) => { await s.store.close() }))
  } finally {
    await stopAll()
    rmSync(work, { recursive: true, force: true })
  }
}

await main()
