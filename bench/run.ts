// `npm run bench`: the gateway measured side by side with its peers in one run, so the targets of
// the performance issue are ratios from the same machine and minute, not absolute figures from
// different days. Starts the backend, one Redis and every server under test as child processes on
// loopback, runs the configurations interleaved A B C … A B C … with the order reversed every other
// round, and writes medians and ratios to bench/results/latest.md (+ latest.json).
//   workloads    one hot key · 1,000 keys used in turn, one per request · 10,000 consumers drawn by a
//                Zipf law (s = 1.1) from a precomputed, seeded sequence (bench/lib/workloads.ts; plans
//                whose limits are never reached; the stock assemblies are keyed by the same bearer tokens)
//   configs      direct backend · bare @fastify/http-proxy · gateway (in-process store) ·
//                gateway (Redis, info logs, metrics: what users run) [· variants] · two stock
//                assemblies (@fastify/http-proxy + @fastify/rate-limit on the same Redis; its ioredis
//                client plain, and with enableAutoPipelining) — ratios against the better of the two
//   per run      req/s; process CPU per request (utime+stime from /proc of the server process and
//                its workers) and Redis CPU per request (/proc of redis-server); Redis commands per
//                request (INFO commandstats deltas); decisions per script call (requests ÷ EVALSHA…)
//   latency      p99 added over direct at a constant rate (default 2,000 req/s)
//   scale        req/s against keys in config (10, 10k, 100k) and distinct keys in traffic (1, 1k, 100k)
// With taskset, the servers under test run on CPU 0 and everything else (this process and its load
// generator, the backend, Redis) on CPU 1: CPU per request is then the figure to read on a shared
// machine, req/s ratios move with the neighbours' load.
// Env: BENCH_SECONDS [5] BENCH_ROUNDS [3] BENCH_CONNECTIONS [50] BENCH_RATE [2000] BENCH_PIN [1]
//      BENCH_QUICK=1 (2 s runs, 1 s warm-ups, the three throughput workloads only — no latency, tracing or
//                   scale section unless forced: ~2–3 min) BENCH_SCALE=0|1 (force the scale section off/on)
//      BENCH_LOADER=autocannon (default wrk when installed)
//      BENCH_GATEWAY_ENV="K=V,K=V"  extra environment for every gateway (e.g. STORE_TIMEOUT_MS=100)
//      BENCH_VARIANTS="name:K=V,K=V;name2:K=V"  more gateway-on-Redis configurations, each with its env
//      BENCH_WEBHOOKS=1  also the gateway on Redis with a webhook endpoint configured (bench/lib/webhooks-variant.ts)
//      BENCH_WORKERS=1  also the gateway with GATEWAY_WORKERS=2 (it cannot be pinned to one core)
//      BENCH_BASELINE=<dir>  also the in-process gateway of another checkout (e.g. `git archive` of an
//                   older commit with node_modules linked in), interleaved with this one: before/after
//      BENCH_BASELINE_REDIS=1  with BENCH_BASELINE, its gateway on Redis too (compared with stock like ours), on a
//                   redis-server of its own (an older layout on the same keys would break both)
//      BENCH_WORKLOADS=hot|keys|zipf  only these throughput workloads (a comma list, e.g. hot,zipf);
//      BENCH_LATENCY=0|1  no constant-rate section / force it in a quick run
//      BENCH_TRACING=0|1  no tracing rows / force them in a quick run;  BENCH_TRACING=only  the tracing rows alone (bench/lib/tracing-cost.ts),
//                   written to bench/results/tracing.md (+ .json) instead of latest.*
//      BENCH_TRACING_ROUNDS [8]  BENCH_TRACING_RATE [closed loop]  (each tracing row runs beside a twin of the
//                   reference — tracing off, or with BENCH_BASELINE that checkout's gateway — at the same time)
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { DAY_WINDOW, MINUTE_WINDOW } from '../src/gateway/limiter/arithmetic.js'
import { BAN_RECORD_BUCKETS } from '../src/gateway/limiter/ban-record.js'
import { BLOCK_HELD_BUCKETS, FIELD } from '../src/gateway/limiter/redis/layout.js'
import { writeConfigWithKeys } from './config-load.js'
import { benchToken, buildWorkloads, CONFIG_KEYS, describePrefix, describeShape, MAX_COMMANDS_PER_REQUEST, scriptCalls, selectWorkloads, type Workload } from './lib/workloads.js'
import { parseEnvList, parseVariants } from './lib/env-list.js'
import { CONFIG_KEY_COUNTS, startScaleGateways } from './lib/scale.js'
import { webhooksVariant, type WebhooksVariant } from './lib/webhooks-variant.js'
import { closedLoop, fixedRate, loaderName, median, type RateRun, type Run } from './lib/load.js'
import { cpuMicros, pinProcess, taskset } from './lib/proc-cpu.js'
import { adminPortEnv, DEFAULT_TRACING_ROUNDS, tracingCost } from './lib/tracing-cost.js'
import { intFromEnv, log, round1 } from './lib/report.js'
import { commandCalls, commandDelta, REPO_ROOT, startBackend, startRedis, stop, stopAll, unboundPlans, type RedisServer } from './lib/processes.js'
import {
  assertServes, DEFAULT_PATH, seed, startGateway as startGatewayOn, startPrinting as startPrintingOn, type GatewayChild, type Target
} from './lib/targets.js'

export { DEFAULT_PATH, SEEDED_PETS } from './lib/targets.js'

export const DEFAULT_SECONDS = 5
export const DEFAULT_QUICK_SECONDS = 2
export const DEFAULT_ROUNDS = 3
export const DEFAULT_CONNECTIONS = 50
/** Per target and workload, quick runs too: a gateway measured half-warm reads as slower than its neighbour in the order. */
export const DEFAULT_WARMUP_SECONDS = 2
export const DEFAULT_QUICK_WARMUP_SECONDS = 1
export const DEFAULT_RATE = 2_000
/** Connections of the constant-rate run: enough that 2,000 req/s never queue behind each other. */
export const DEFAULT_RATE_CONNECTIONS = 16
export { CONFIG_KEY_COUNTS }
export const ACTIVE_KEY_COUNTS = [1, 1_000, 100_000] as const
/** Ids whose Redis keys are sized with MEMORY USAGE after the scale runs. */
export const MEMORY_SAMPLE_IDS = 200
/** Cores of the pinned layout: the server under test alone on one, everything else on the other. */
export const SERVER_CPUS = '0'
export const REST_CPUS = '1'

const RESULTS_DIR = join(REPO_ROOT, 'bench', 'results')

const round3 = (x: number): number => Math.round(x * 1000) / 1000
const fmt = (x: number, digits = 2): string => Number.isFinite(x) ? x.toFixed(digits) : 'n/a'

let serverCpus: string | undefined

async function startPrinting (name: string, script: string, args: string[]): Promise<Target> {
  return await startPrintingOn(name, script, args, { cpus: serverCpus })
}

/** The real entry point (src/gateway/server.ts), configured from the environment as users run it. */
async function startGateway (name: string, opts: GatewayChild): Promise<Target> {
  return await startGatewayOn(name, { cpus: serverCpus, ...opts })
}

interface Params { seconds: number, rounds: number, connections: number, warmup: number, rate: number }

/** One measured run: the load's figures plus CPU and Redis commands per request, and the run's script calls. */
interface Measured extends Run { processUs: number, redisUs: number, commands: number, calls: Record<string, number>, scriptCalls: number }

/** Interleaved rounds over `targets`, order reversed every other round; every run fed to `onRun`. */
async function interleave<R extends Run> (targets: Target[], p: Params, onRun: (target: Target, round: number) => Promise<R>): Promise<Map<string, R[]>> {
  const runs = new Map<string, R[]>(targets.map((t) => [t.name, []]))
  for (let round = 0; round < p.rounds; round++) {
    const order = round % 2 === 0 ? targets : [...targets].reverse()
    for (const target of order) {
      const run = await onRun(target, round)
      runs.get(target.name)?.push(run)
      const m = run as Partial<Measured>
      const cpu = m.processUs === undefined ? '' : `  cpu ${fmt(m.processUs, 1)}+${fmt(m.redisUs ?? NaN, 1)} µs/req`
      const extra = cpu + (m.commands === undefined ? '' : `  redis cmds ${fmt(m.commands, 3)}/req`)
      log(`  round ${round + 1}/${p.rounds}  ${target.name.padEnd(40)} ${run.requestsPerSecond.toFixed(0).padStart(7)} req/s  p50 ${run.latencyP50Ms.toFixed(2)} ms  p99 ${run.latencyP99Ms.toFixed(2)} ms${extra}  non-2xx ${run.non2xx}  errors ${run.errors}`)
    }
  }
  return runs
}

interface Row {
  name: string
  rps: number
  p50: number
  p99: number
  non2xx: number
  errors: number
  rounds: number[]
  /** Medians over rounds, per request. */
  processUs: number
  redisUs: number
  cpuUs: number
  redisCommands: number
  processUsRounds: number[]
  /** (max − min) / median of the rounds' req/s and process CPU: how noisy the row was. */
  rpsSpread: number
  cpuSpread: number
  /** Requests ÷ script calls over all rounds (NaN when no script ran: nothing went to Redis, or no script). */
  decisionsPerScriptCall: number
  calls: Record<string, number>
}

const spread = (xs: number[]): number => xs.length === 0 ? NaN : round3((Math.max(...xs) - Math.min(...xs)) / median(xs))

function summarize (runs: Map<string, Measured[]>): Row[] {
  return [...runs].map(([name, rs]) => {
    const requests = rs.reduce((a, r) => a + r.total, 0)
    const scripts = rs.reduce((a, r) => a + r.scriptCalls, 0)
    const calls: Record<string, number> = {}
    for (const r of rs) for (const [cmd, n] of Object.entries(r.calls)) calls[cmd] = (calls[cmd] ?? 0) + n
    return {
      name,
      rps: Math.round(median(rs.map((r) => r.requestsPerSecond))),
      p50: median(rs.map((r) => r.latencyP50Ms)),
      p99: median(rs.map((r) => r.latencyP99Ms)),
      non2xx: rs.reduce((a, r) => a + r.non2xx, 0),
      errors: rs.reduce((a, r) => a + r.errors, 0),
      rounds: rs.map((r) => Math.round(r.requestsPerSecond)),
      processUs: round1(median(rs.map((r) => r.processUs))),
      redisUs: round1(median(rs.map((r) => r.redisUs))),
      cpuUs: round1(median(rs.map((r) => r.processUs + r.redisUs))),
      redisCommands: round3(median(rs.map((r) => r.commands))),
      processUsRounds: rs.map((r) => round1(r.processUs)),
      rpsSpread: spread(rs.map((r) => r.requestsPerSecond)),
      cpuSpread: spread(rs.map((r) => r.processUs)),
      decisionsPerScriptCall: scripts === 0 ? NaN : round1(requests / scripts),
      calls: Object.fromEntries(Object.entries(calls).map(([cmd, n]) => [cmd, round3(n / requests)]))
    }
  })
}

/** Ratio of medians, and the median of per-round ratios (robust to drift between rounds). */
function ratio (rows: Row[], a: string, b: string): { ofMedians: number, medianOfRounds: number } {
  const ra = rows.find((r) => r.name === a)
  const rb = rows.find((r) => r.name === b)
  if (ra === undefined || rb === undefined) return { ofMedians: NaN, medianOfRounds: NaN }
  return {
    ofMedians: round3(ra.rps / rb.rps),
    medianOfRounds: round3(median(ra.rounds.map((x, i) => x / (rb.rounds[i] ?? NaN))))
  }
}

async function memoryPerKey (redis: RedisServer, ids: string[]): Promise<{ sampled: number, bytesPerActiveKey: number, redisKeysPerActiveKey: number }> {
  let bytes = 0
  let keys = 0
  let sampled = 0
  for (const id of ids) {
    const names = (await redis.cli('--scan', '--pattern', `rl:{${id}}:*`)).split('\n').filter((s) => s !== '')
    if (names.length === 0) continue
    sampled++
    keys += names.length
    for (const name of names) bytes += Number(await redis.cli('MEMORY', 'USAGE', name, 'SAMPLES', '0'))
  }
  return { sampled, bytesPerActiveKey: sampled === 0 ? NaN : Math.round(bytes / sampled), redisKeysPerActiveKey: sampled === 0 ? NaN : round3(keys / sampled) }
}

/**
 * MEMORY USAGE of one id's state at its largest, written by hand in the grant script's layout (layout.ts FIELD: the
 * hash `rl:{id}` and its day ring `rl:{id}:d`), then deleted: every minute and day bucket at its widest value (tag ×
 * scale + units, 16 digits), a ban with its escalation, the record of recent 429s full (60 counted and 60 pending
 * events, BAN_RECORD_BUCKETS), and for each of `holders` processes a reserve, three blocks held and a lapsed reserve.
 * Redis keeps a hash as a listpack only while every value is at most 64 bytes (hash-max-listpack-value): the record,
 * the reserves and the blocks of more than one process pass that, and the hash becomes a hashtable.
 */
async function worstCaseKeyBytes (redis: RedisServer, holders: number): Promise<number> {
  const key = 'rl:{bench-worst-case}'
  const widest = String(2 ** 52 - 1)
  const holderIds = Array.from({ length: holders }, (_, index) => `holder${String(index).padStart(2, '0')}`)
  const atMs = '1900000000000'
  const record = [
    ...Array.from({ length: BAN_RECORD_BUCKETS }, (_, index) => `${1_900_000_000_000 + index * 1000}:1000000`),
    ...Array.from({ length: BAN_RECORD_BUCKETS }, (_, index) => `${1_900_000_000_000 + index * 1000}:1000000s`)
  ].join(',')
  const fields: Record<string, string> = {
    [FIELD.minuteNewest]: '1900000000', [FIELD.minuteUnits]: '1000000000', [FIELD.minuteOldest]: '1899999940',
    [FIELD.dayNewest]: '2111111', [FIELD.dayUnits]: '1000000000000', [FIELD.dayOldest]: '2111015', [FIELD.dayNewestUnits]: '1000000000',
    [FIELD.month]: '24371', [FIELD.monthUnits]: '1000000000000',
    [FIELD.banEnd]: atMs, [FIELD.lastBanEnd]: atMs, [FIELD.banLevel]: '39', [FIELD.recentRejections]: record,
    [FIELD.reserves]: holderIds.map((holder) => `${holder},1000000,${atMs}`).join(';'),
    [FIELD.blocks]: holderIds.flatMap((holder) => Array.from({ length: BLOCK_HELD_BUCKETS }, (_, age) => `${holder},${1_900_000_000 - age},1000000`)).join(';'),
    [FIELD.expiry]: atMs,
    [FIELD.lapsedReserves]: holderIds.map((holder) => `${holder},1000000,2111111,24371`).join(';')
  }
  for (let slot = 0; slot < MINUTE_WINDOW.slots; slot++) fields[String(slot)] = widest
  await redis.cli('HSET', key, ...Object.entries(fields).flat())
  await redis.cli('HSET', `${key}:d`, ...Array.from({ length: DAY_WINDOW.slots }, (_, slot) => [String(slot), widest]).flat())
  let bytes = 0
  for (const name of [key, `${key}:d`]) bytes += Number(await redis.cli('MEMORY', 'USAGE', name, 'SAMPLES', '0'))
  await redis.cli('DEL', key, `${key}:d`)
  return bytes
}

async function main (): Promise<void> {
  const quick = process.env.BENCH_QUICK === '1'
  const p: Params = {
    seconds: intFromEnv('BENCH_SECONDS', quick ? DEFAULT_QUICK_SECONDS : DEFAULT_SECONDS),
    rounds: Math.max(3, intFromEnv('BENCH_ROUNDS', DEFAULT_ROUNDS)),
    connections: intFromEnv('BENCH_CONNECTIONS', DEFAULT_CONNECTIONS),
    warmup: quick ? DEFAULT_QUICK_WARMUP_SECONDS : DEFAULT_WARMUP_SECONDS,
    rate: intFromEnv('BENCH_RATE', DEFAULT_RATE)
  }
  const tracingOnly = process.env.BENCH_TRACING === 'only'
  // A quick run is the throughput workloads: the other sections run when asked for by name.
  const section = (name: string): boolean => { const v = process.env[name]; return v === undefined || v === '' ? !quick : v !== '0' }
  const scale = process.env.BENCH_SCALE === undefined || process.env.BENCH_SCALE === '' ? !quick : process.env.BENCH_SCALE === '1'
  const gatewayEnv = parseEnvList(process.env.BENCH_GATEWAY_ENV)
  const variants = parseVariants(process.env.BENCH_VARIANTS)
  // Pinned: this process (the load generator, and every child that is not a server under test —
  // the backend, Redis) on REST_CPUS, each server under test on SERVER_CPUS.
  const pinned = process.env.BENCH_PIN !== '0' && cpus().length >= 2 && taskset() !== null && pinProcess(process.pid, REST_CPUS)
  serverCpus = pinned ? SERVER_CPUS : undefined
  const begun = Date.now()
  const work = mkdtempSync(join(tmpdir(), 'petstore-bench-'))
  const stopOnSignal = (): void => { void stopAll().then(() => process.exit(130)) }
  process.once('SIGINT', stopOnSignal)
  process.once('SIGTERM', stopOnSignal)
  const report: Record<string, unknown> = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', node: process.version, loadAverageAtStart: loadavg() },
    params: { ...p, path: DEFAULT_PATH, quick, scale, loadGenerator: loaderName(), pinned: pinned ? { servers: SERVER_CPUS, rest: REST_CPUS } : false, gatewayEnv, variants }
  }
  const md: string[] = []
  let webhooks: WebhooksVariant | undefined
  try {
    const redis = await startRedis(work)
    const redisPid = redis.child.pid
    const { url: backendUrl, child: backendChild } = await startBackend(work)
    await seed(backendUrl)
    // One config for every workload: 10,000 keys on plans whose limits no run reaches (keys in
    // config do not change the cost per request: the scale section checks it).
    const configDir = writeConfigWithKeys(CONFIG_KEYS, mkdirAndReturn(join(work, 'config-bench')))
    unboundPlans(configDir)
    if (process.env.BENCH_WEBHOOKS === '1') {
      webhooks = await webhooksVariant(configDir)
      variants.push({ name: webhooks.name, env: webhooks.env })
    }
    const workloads: Workload[] = tracingOnly ? [] : buildWorkloads(selectWorkloads(process.env.BENCH_WORKLOADS))

    /** One closed-loop run of `tokens` against `t`, with the CPU and Redis commands it cost. */
    async function measure (t: Target, tokens: string[], order?: number[]): Promise<Measured> {
      // The baseline's gateway on Redis has a Redis of its own: an older checkout's layout on the same keys breaks both.
      const its = t.name === baselineRedis && baselineRedisServer !== undefined ? baselineRedisServer : redis
      const itsPid = its.child.pid
      const cmdBefore = await commandCalls(its)
      const cpuBefore = cpuMicros(t.pid)
      const redisBefore = cpuMicros(itsPid)
      const run = await closedLoop({ url: `${t.url}${DEFAULT_PATH}`, seconds: p.seconds, connections: p.connections, tokens, ...(order === undefined ? {} : { order }) })
      const cpuAfter = cpuMicros(t.pid)
      const redisAfter = cpuMicros(itsPid)
      const delta = commandDelta(cmdBefore, await commandCalls(its))
      const n = Math.max(1, run.total)
      return { ...run, processUs: (cpuAfter - cpuBefore) / n, redisUs: (redisAfter - redisBefore) / n, commands: delta.sent / n, calls: delta.calls, scriptCalls: scriptCalls(delta.calls) }
    }

    const direct = 'direct backend'
    const bare = 'bare @fastify/http-proxy'
    const gwMemory = 'gateway, in-process store'
    const gwRedis = 'gateway, Redis'
    const stock = 'stock: http-proxy + rate-limit (Redis)'
    const stockAp = 'stock, ioredis auto-pipelining'
    const stocks = [stock, stockAp]
    const usesRedis = (name: string): boolean => stocks.includes(name) || redisGateways.includes(name) || name.startsWith(gwRedis)
    const baseline = process.env.BENCH_BASELINE
    const baselineRedis = baseline !== undefined && baseline !== '' && process.env.BENCH_BASELINE_REDIS === '1' ? `${gwRedis} (baseline)` : undefined
    const redisGateways = [gwRedis, ...baselineRedis === undefined ? [] : [baselineRedis], ...variants.map((v) => `${gwRedis}, ${v.name}`)]
    const baselineRedisServer = baselineRedis === undefined ? undefined : await startRedis(work)
    const targets: Target[] = [
      { name: direct, url: backendUrl, child: undefined, pid: backendChild.pid },
      await startPrinting(bare, 'bench/servers/bare-proxy.ts', [backendUrl]),
      await startGateway(gwMemory, { configDir, backendUrl, env: gatewayEnv }),
      await startGateway(gwRedis, { configDir, backendUrl, redisUrl: redis.url, env: gatewayEnv }),
      ...await Promise.all(variants.map(async (v) => await startGateway(`${gwRedis}, ${v.name}`, { configDir, backendUrl, redisUrl: redis.url, env: { ...gatewayEnv, ...v.env } }))),
      await startPrinting(stock, 'bench/servers/stock.ts', [backendUrl, redis.url]),
      await startPrinting(stockAp, 'bench/servers/stock.ts', [backendUrl, redis.url, 'auto-pipelining'])
    ]
    if (baseline !== undefined && baseline !== '') targets.splice(3, 0, await startGateway(`${gwMemory} (baseline: ${baseline})`, { configDir, backendUrl, env: gatewayEnv, root: baseline }))
    if (baselineRedis !== undefined) targets.splice(5, 0, await startGateway(baselineRedis, { configDir, backendUrl, redisUrl: baselineRedisServer?.url ?? redis.url, env: gatewayEnv, root: baseline }))
    if (process.env.BENCH_WORKERS === '1') targets.push(await startGateway(`${gwRedis}, 2 workers (unpinned)`, { configDir, backendUrl, redisUrl: redis.url, workers: 2, env: gatewayEnv }))
    // Both ends of the config: a gateway without the Zipf workload's 10,000 keys answers 401 here.
    for (const t of targets) for (const token of [benchToken(0), benchToken(CONFIG_KEYS - 1)]) await assertServes(t, token)

    // ---- throughput, per workload ------------------------------------------------------------
    const perWorkload: Record<string, { rows: Row[], ratios: Record<string, unknown>, shape?: unknown }> = {}
    const checks: Array<{ target: string, value: number, ok: boolean }> = []
    // One line per workload (and gateway on Redis): the figures the performance issue reads first.
    const summaryMd: string[] = []
    const processRowsOf = (rows: Row[], name: string): Row | undefined => rows.find((r) => r.name === name)
    if (!tracingOnly) md.push(`## Throughput (GET ${DEFAULT_PATH}, closed loop)`, '',
      `${p.rounds} interleaved rounds × ${p.seconds} s per workload, ${p.connections} connections, ${loaderName()}; medians. ` +
      'Ratio columns: this row ÷ the named row (ratio of median req/s). CPU columns: µs per request served, medians of the rounds — ' +
      '"process": utime+stime of the server process (the backend for "direct"); "Redis": of redis-server; "cmds": Redis commands the server sent per request (INFO commandstats; a script\'s inner calls are not counted again); ' +
      '"decisions per script call": requests served ÷ script calls (EVALSHA, EVAL, FCALL …) over all rounds — units held from an earlier call (a grant) or a batch make it more than 1; "spread": (max − min) ÷ median of the rounds, per row.',
      pinned ? `Pinned with taskset: servers under test on CPU ${SERVER_CPUS}; the backend, Redis and the load generator on CPU ${REST_CPUS}.` : 'Not pinned (no taskset, one core, or BENCH_PIN=0).', '')
    for (const w of workloads) {
      const loadAtStart = loadavg()
      log(`throughput, ${w.name}: ${p.rounds} rounds × ${p.seconds} s, ${p.connections} connections, GET ${DEFAULT_PATH}; load average ${loadAtStart.map((l) => l.toFixed(1)).join(' ')}`)
      for (const t of targets) await closedLoop({ url: `${t.url}${DEFAULT_PATH}`, seconds: p.warmup, connections: p.connections, tokens: w.tokens, ...(w.order === undefined ? {} : { order: w.order }) })
      const rows = summarize(await interleave(targets, p, async (t) => await measure(t, w.tokens, w.order)))
      const bareRow = processRowsOf(rows, bare)
      // The better stock assembly: by req/s for the req/s ratios, by CPU per request for the CPU ratio.
      const stockRows = stocks.map((name) => processRowsOf(rows, name)).filter((r): r is Row => r !== undefined)
      const fastestStock = stockRows.reduce<Row | undefined>((best, r) => best === undefined || r.rps > best.rps ? r : best, undefined)
      const leanestStock = stockRows.reduce<Row | undefined>((best, r) => best === undefined || r.cpuUs < best.cpuUs ? r : best, undefined)
      const ratios: Record<string, unknown> = {
        loadAverageAtStart: loadAtStart,
        betterStockByRps: fastestStock?.name,
        betterStockByCpu: leanestStock?.name,
        bareOverDirect: ratio(rows, bare, direct),
        stockOverBare: ratio(rows, stock, bare),
        autoPipeliningOverStock: ratio(rows, stockAp, stock),
        memoryOverBare: ratio(rows, gwMemory, bare),
        policyLayerCpuUs: round1((processRowsOf(rows, gwMemory)?.processUs ?? NaN) - (bareRow?.processUs ?? NaN))
      }
      const maxCommands = MAX_COMMANDS_PER_REQUEST[w.id]
      for (const g of redisGateways) {
        const row = processRowsOf(rows, g)
        const r = {
          overDirect: ratio(rows, g, direct),
          overBare: ratio(rows, g, bare),
          overStock: ratio(rows, g, stock),
          overAutoPipelining: ratio(rows, g, stockAp),
          overBetterStock: ratio(rows, g, fastestStock?.name ?? stock),
          cpuOverStock: round3((row?.cpuUs ?? NaN) / (processRowsOf(rows, stock)?.cpuUs ?? NaN)),
          cpuOverBetterStock: round3((row?.cpuUs ?? NaN) / (leanestStock?.cpuUs ?? NaN)),
          decisionsPerScriptCall: row?.decisionsPerScriptCall ?? NaN
        }
        ratios[g] = r
        checks.push(
          { target: `${w.name}: ${g} ≥ 1.2 × the better stock assembly (req/s)`, value: r.overBetterStock.ofMedians, ok: r.overBetterStock.ofMedians >= 1.2 },
          { target: `${w.name}: ${g} ≥ 0.95 × bare proxy (req/s)`, value: r.overBare.ofMedians, ok: r.overBare.ofMedians >= 0.95 },
          { target: `${w.name}: ${g} ≥ 0.40 × direct (req/s)`, value: r.overDirect.ofMedians, ok: r.overDirect.ofMedians >= 0.40 },
          { target: `${w.name}: ${g} process + Redis CPU per request ≤ 0.8 × the better stock assembly's`, value: r.cpuOverBetterStock, ok: r.cpuOverBetterStock <= 0.8 },
          { target: `${w.name}: ${g} Redis commands per request ≤ ${maxCommands}`, value: row?.redisCommands ?? NaN, ok: (row?.redisCommands ?? Infinity) <= maxCommands }
        )
        const cpu = (name: string): string => { const x = processRowsOf(rows, name); return x === undefined ? 'n/a' : `${fmt(x.processUs, 0)} + ${fmt(x.redisUs, 0)}` }
        const cmds = (name: string): string => fmt(processRowsOf(rows, name)?.redisCommands ?? NaN, 3)
        summaryMd.push(`| ${w.name}${redisGateways.length > 1 ? ` (${g})` : ''} | ${fmt(r.overBetterStock.ofMedians)} | ${fmt(r.overBare.ofMedians)} | ${cpu(g)} | ${cpu(stock)} | ${cpu(stockAp)} | ${cpu(bare)} | ${cmds(g)} / ${cmds(stock)} / ${cmds(stockAp)} | ${fmt(r.decisionsPerScriptCall, 1)} | ${fmt(Math.max(...rows.map((x) => x.rpsSpread)) * 100, 0)} % / ${fmt(Math.max(...rows.map((x) => x.cpuSpread)) * 100, 0)} % | ${loadAtStart.map((l) => l.toFixed(1)).join(' ')} |`)
      }
      checks.push({ target: `${w.name}: policy layer (gateway in-process − bare, process CPU) ≤ 40 µs per request`, value: ratios.policyLayerCpuUs as number, ok: (ratios.policyLayerCpuUs as number) <= 40 })
      perWorkload[w.name] = { rows, ratios, ...(w.shape === undefined ? {} : { shape: w.shape }) }
      md.push(`### ${w.title}`, '',
        ...(w.shape === undefined || w.order === undefined ? [] : [describeShape(w.shape, w.order.length) + ' ' + describePrefix(w.order, Math.round((processRowsOf(rows, gwRedis)?.rps ?? 0) * p.seconds)), '']),
        `Load average at the start of this workload: ${loadAtStart.map((l) => l.toFixed(2)).join(' ')}. Better stock assembly: ${fastestStock?.name ?? 'n/a'} by req/s, ${leanestStock?.name ?? 'n/a'} by CPU per request.`, '',
        '| configuration | req/s | ÷ direct | ÷ bare proxy | ÷ better stock | process µs/req | Redis µs/req | process + Redis | Redis cmds/req | decisions per script call | spread req/s · CPU | p50 ms | p99 ms | non-2xx | errors |',
        '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
      for (const r of rows) {
        md.push(`| ${r.name} | ${r.rps} | ${fmt(ratio(rows, r.name, direct).ofMedians)} | ${fmt(ratio(rows, r.name, bare).ofMedians)} | ${fmt(ratio(rows, r.name, fastestStock?.name ?? stock).ofMedians)} | ${fmt(r.processUs, 1)} | ${fmt(r.redisUs, 1)} | ${fmt(r.cpuUs, 1)} | ${fmt(r.redisCommands, 3)} | ${usesRedis(r.name) && Number.isFinite(r.decisionsPerScriptCall) ? fmt(r.decisionsPerScriptCall, 1) : '—'} | ${fmt(r.rpsSpread * 100, 0)} % · ${fmt(r.cpuSpread * 100, 0)} % | ${fmt(r.p50, 2)} | ${fmt(r.p99, 2)} | ${r.non2xx} | ${r.errors} |`)
      }
      md.push('', `Policy layer (gateway on the in-process store − bare proxy, process CPU): ${fmt(ratios.policyLayerCpuUs as number, 1)} µs per request. Per-round req/s: ${rows.map((r) => `${r.name} ${r.rounds.join(' / ')}`).join('; ')}. Per-round process CPU (µs/req): ${rows.map((r) => `${r.name} ${r.processUsRounds.join(' / ')}`).join('; ')}.`, '',
        // Redis is the bench's own, but on a shared machine a neighbour's client may reach its port (a
        // port reused after their Redis stopped): what Redis counts while only the direct backend runs is theirs.
        `Redis commands per request while the direct backend ran (no server under test talks to Redis: traffic from outside the bench, the floor of every row's figure): ${fmt(processRowsOf(rows, direct)?.redisCommands ?? NaN, 3)}.`, '',
        'Redis calls per request as commandstats counts them (scripts\' inner calls included; below 0.001 left out):', '')
      for (const r of rows) {
        const calls = Object.entries(r.calls).filter(([, n]) => n >= 0.001)
        if (calls.length > 0) md.push(`- ${r.name}: ${calls.map(([cmd, n]) => `${cmd} ${n}`).join(', ')}`)
      }
      md.push('')
    }
    report.throughput = perWorkload

    // ---- latency at a constant rate --------------------------------------------------------
    if (section('BENCH_LATENCY') && !tracingOnly) {
      log(`latency: ${p.rate} req/s constant, ${p.rounds} rounds × ${p.seconds} s`)
      // The Zipf traffic: its long tail waits for grant calls, which is where latency could be added.
      const zipf = buildWorkloads(new Set(['zipf']))[0]!
      const latencyTargets = targets.filter((t) => t.name === direct || t.name === bare || t.name.startsWith(gwMemory) || stocks.includes(t.name) || redisGateways.includes(t.name))
      const rateRuns = new Map<string, Array<RateRun & { processUs: number, redisUs: number }>>(latencyTargets.map((t) => [t.name, []]))
      await interleave(latencyTargets, p, async (t) => {
        // CPU per request at the same request rate for every configuration: no configuration gets
        // the cheaper per-request cost of bigger event-loop batches by being faster.
        const itsPid = t.name === baselineRedis && baselineRedisServer !== undefined ? baselineRedisServer.child.pid : redisPid
        const cpuBefore = cpuMicros(t.pid)
        const redisBefore = cpuMicros(itsPid)
        const run = await fixedRate({ url: `${t.url}${DEFAULT_PATH}`, seconds: p.seconds, connections: DEFAULT_RATE_CONNECTIONS, tokens: zipf.tokens, order: zipf.order, rate: p.rate })
        const n = Math.max(1, run.total)
        const measured = { ...run, processUs: (cpuMicros(t.pid) - cpuBefore) / n, redisUs: (cpuMicros(itsPid) - redisBefore) / n }
        rateRuns.get(t.name)?.push(measured)
        return measured
      })
      const latencyRows = [...rateRuns].map(([name, rs]) => ({
        name,
        achievedRps: Math.round(median(rs.map((r) => r.requestsPerSecond))),
        p50: round3(median(rs.map((r) => r.latencyP50Ms))),
        p90: round3(median(rs.map((r) => r.latencyP90Ms))),
        p99: round3(median(rs.map((r) => r.latencyP99Ms))),
        p999: round3(median(rs.map((r) => r.latencyP999Ms))),
        p99Rounds: rs.map((r) => round3(r.latencyP99Ms)),
        processUs: round1(median(rs.map((r) => r.processUs))),
        redisUs: round1(median(rs.map((r) => r.redisUs)))
      }))
      const directLatency = latencyRows.find((r) => r.name === direct)
      const addedP99 = (name: string): number => round3((latencyRows.find((r) => r.name === name)?.p99 ?? NaN) - (directLatency?.p99 ?? NaN))
      report.latency = { rate: p.rate, rows: latencyRows, addedP99Ms: Object.fromEntries(latencyTargets.filter((t) => t.name !== direct).map((t) => [t.name, addedP99(t.name)])) }
      md.push(`## Latency at a constant ${p.rate} req/s (${zipf.name})`, '',
        `${DEFAULT_RATE_CONNECTIONS} connections, autocannon, exact per-request latencies (ms); medians of ${p.rounds} rounds.`, '',
        '| configuration | achieved req/s | p50 | p90 | p99 | p99.9 | p99 added over direct | process µs/req | Redis µs/req |', '|---|---:|---:|---:|---:|---:|---:|---:|---:|')
      for (const r of latencyRows) md.push(`| ${r.name} | ${r.achievedRps} | ${r.p50} | ${r.p90} | ${r.p99} | ${r.p999} | ${r.name === direct ? '—' : addedP99(r.name).toFixed(3)} | ${fmt(r.processUs, 1)} | ${fmt(r.redisUs, 1)} |`)
      const rateCpu = (name: string): number => latencyRows.find((r) => r.name === name)?.processUs ?? NaN
      const policyAtRate = round1(rateCpu(gwMemory) - rateCpu(bare))
      md.push('', `CPU at the same ${p.rate} req/s for every configuration (process = the server's own; the backend's for direct). Policy layer at this rate (gateway on the in-process store − bare proxy): ${fmt(policyAtRate, 1)} µs per request.`, '')
      checks.push({ target: `policy layer at ${p.rate} req/s (gateway in-process − bare, process CPU) ≤ 40 µs per request`, value: policyAtRate, ok: policyAtRate <= 40 })
      ;(report.latency as Record<string, unknown>).policyLayerCpuUs = policyAtRate
      for (const g of redisGateways) {
        const value = round3(addedP99(g) - addedP99(bare))
        checks.push({ target: `p99 added at ${p.rate} req/s: ${g} ≤ bare proxy's + 0.5 ms (ms over bare's)`, value, ok: value <= 0.5 })
      }
    }

    for (const t of targets) if (t.child !== undefined) await stop(t.child)

    // ---- tracing ---------------------------------------------------------------------------
    if (tracingOnly || section('BENCH_TRACING')) {
      const tracing = await tracingCost({
        startGateway: async (name, env, root) => {
          const admin = await adminPortEnv()
          const target = await startGateway(name, { configDir, backendUrl, redisUrl: redis.url, env: { ...gatewayEnv, ...env, ...admin.env }, ...(root === undefined ? {} : { root }) })
          return { ...target, adminUrl: admin.adminUrl }
        },
        baselineRoot: baseline === undefined || baseline === '' ? undefined : baseline,
        tokenPrefix: 'bench-key-',
        path: DEFAULT_PATH,
        seconds: p.seconds,
        rounds: intFromEnv('BENCH_TRACING_ROUNDS', DEFAULT_TRACING_ROUNDS),
        connections: p.connections,
        rate: process.env.BENCH_TRACING_RATE === undefined || process.env.BENCH_TRACING_RATE === '' ? undefined : intFromEnv('BENCH_TRACING_RATE', 0),
        pinning: pinned ? `Pinned with taskset: the gateways on CPU ${SERVER_CPUS}; the backend, Redis, the collector and the load generator on CPU ${REST_CPUS}.` : 'Not pinned.',
        log
      })
      md.push(...tracing.md)
      report.tracing = tracing.report
      checks.push(...tracing.checks)
    }

    // ---- scale -----------------------------------------------------------------------------
    let scaleReport: Record<string, unknown> | undefined
    if (scale && !tracingOnly) {
      log(`scale: keys in config ${CONFIG_KEY_COUNTS.join(' / ')}, active keys ${ACTIVE_KEY_COUNTS.join(' / ')}`)
      const largest = CONFIG_KEY_COUNTS[CONFIG_KEY_COUNTS.length - 1] ?? 0
      const allTokens = Array.from({ length: largest }, (_, i) => `bench-key-${i}`)
      const byConfig = await startScaleGateways(work, { cpus: serverCpus, backendUrl, redisUrl: redis.url, env: gatewayEnv })
      const big = byConfig[byConfig.length - 1]
      if (big === undefined) throw new Error('no gateway')
      const tokensOf = new Map<string, string[]>(byConfig.map((t) => [t.name, ['bench-key-0']]))
      const byActive: Target[] = ACTIVE_KEY_COUNTS.map((n) => {
        const name = `config ${largest.toLocaleString('en')} keys, ${n.toLocaleString('en')} active (rotating)`
        tokensOf.set(name, n === 1 ? ['bench-key-0', 'bench-key-0'] : allTokens.slice(0, n))
        return { name, url: big.url, child: big.child, pid: big.pid }
      })
      const scaleTargets = [...byConfig, ...byActive]
      for (const t of scaleTargets) await closedLoop({ url: `${t.url}${DEFAULT_PATH}`, seconds: p.warmup, connections: p.connections, tokens: tokensOf.get(t.name) ?? [] })
      const memoryBefore = Number(/used_memory:(\d+)/.exec(await redis.cli('INFO', 'memory'))?.[1] ?? NaN)
      const keysBefore = Number(await redis.cli('DBSIZE'))
      const scaleRuns = await interleave(scaleTargets, p, async (t) => await measure(t, tokensOf.get(t.name) ?? []))
      const scaleRows = summarize(scaleRuns)
      const memoryAfter = Number(/used_memory:(\d+)/.exec(await redis.cli('INFO', 'memory'))?.[1] ?? NaN)
      const keysAfter = Number(await redis.cli('DBSIZE'))
      const sample = await memoryPerKey(redis, allTokens.slice(0, MEMORY_SAMPLE_IDS).map((_, i) => `key-${i}`))
      const worst = await worstCaseKeyBytes(redis, 1)
      const worstFour = await worstCaseKeyBytes(redis, 4)
      const configRatio = ratio(scaleRows, byConfig[byConfig.length - 1]?.name ?? '', byConfig[0]?.name ?? '')
      scaleReport = {
        rows: scaleRows,
        config100kOver10: configRatio,
        memory: { ...sample, worstCaseBytes: worst, worstCaseBytesFourProcesses: worstFour, redisKeysAddedDuringScaleRuns: keysAfter - keysBefore, usedMemoryDeltaBytes: memoryAfter - memoryBefore }
      }
      md.push('', '## Scale', '', 'Gateway on Redis (info logs, metrics). Keys in config: one active key. Active keys: tokens used in turn, one per request, against the 100,000-key config (first touches of a key create its Redis state).', '',
        '| configuration | req/s | p50 ms | p99 ms | ÷ first row | non-2xx |', '|---|---:|---:|---:|---:|---:|')
      for (const r of scaleRows) md.push(`| ${r.name} | ${r.rps} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${ratio(scaleRows, r.name, scaleRows[0]?.name ?? '').ofMedians.toFixed(2)} | ${r.non2xx} |`)
      md.push('', `- 100,000 vs 10 keys in config: ${configRatio.ofMedians.toFixed(3)} (ratio of medians), ${configRatio.medianOfRounds.toFixed(3)} (median of per-round ratios).`,
        `- Redis memory per active key: worst case ${worst} bytes with one gateway process, ${worstFour} with four (both rings full — 61 minute and 97 day buckets — a ban and its escalation, the record of recent 429s full, and per process a reserve, three blocks held and a lapsed reserve, written in the grant script's layout: past 64 bytes a value turns the hash from a listpack into a hashtable); as found after the runs, ${sample.bytesPerActiveKey} bytes in ${sample.redisKeysPerActiveKey} Redis keys (MEMORY USAGE of every key of ${sample.sampled} sampled ids; a minute ring expires 61 s after its last request).`,
        `- Redis keys created during the scale runs: ${keysAfter - keysBefore}; used_memory grew by ${memoryAfter - memoryBefore} bytes (≈ ${Math.round((memoryAfter - memoryBefore) / Math.max(1, (keysAfter - keysBefore) / (sample.redisKeysPerActiveKey || 1)))} bytes per active key).`)
      for (const t of byConfig) if (t.child !== undefined) await stop(t.child)
    }
    report.scale = scaleReport

    // ---- targets ---------------------------------------------------------------------------
    const scaleChecks = scaleReport === undefined
      ? []
      : [
          { target: '100k vs 10 keys in config within 5 %', value: (scaleReport.config100kOver10 as { ofMedians: number }).ofMedians, ok: Math.abs((scaleReport.config100kOver10 as { ofMedians: number }).ofMedians - 1) <= 0.05 },
          { target: 'Redis memory per active key ≤ 2 KB (worst case, one process)', value: (scaleReport.memory as { worstCaseBytes: number }).worstCaseBytes, ok: (scaleReport.memory as { worstCaseBytes: number }).worstCaseBytes <= 2048 }
        ]
    report.targets = [...checks, ...scaleChecks]
    report.durationSeconds = Math.round((Date.now() - begun) / 1000)
    report.machine = { ...(report.machine as object), loadAverageAtEnd: loadavg() }
    const allRows = [...Object.values(perWorkload).flatMap((w) => w.rows), ...((scaleReport?.rows as Row[] | undefined) ?? [])]
    const failing = allRows.filter((r) => r.non2xx > 0 || r.errors > 0)
    const directRow = perWorkload['hot key']?.rows.find((r) => r.name === direct)
    const head = [
      '# Gateway benchmark — latest run', '',
      `${new Date().toISOString()} · ${cpus().length} × ${cpus()[0]?.model ?? 'CPU'} · Node ${process.version} · load average at start ${(report.machine as { loadAverageAtStart: number[] }).loadAverageAtStart.map((l) => l.toFixed(1)).join(' ')} · ${report.durationSeconds} s${quick ? ' · BENCH_QUICK' : ''}`,
      ...(Object.keys(gatewayEnv).length === 0 ? [] : [`Extra gateway environment: ${Object.entries(gatewayEnv).map(([k, v]) => `${k}=${v}`).join(' ')}.`]), '',
      `**Read CPU per request and ratios, not absolute req/s.** Everything runs on this machine's ${cpus().length} cores at once (shared with other work): the backend, Redis, the server under test and the load generator compete for them, so absolute req/s are far below what each would do alone and move with the neighbours' load; CPU per request (from /proc) does not. Direct backend: ${directRow?.rps ?? '?'} req/s.`, '',
      ...(failing.length === 0 ? [] : [`**Invalid run: non-2xx answers or errors in ${failing.map((r) => r.name).join('; ')}** — their figures measure errors, not the proxy path.`, '']),
      ...(summaryMd.length === 0
        ? []
        : ['## Per workload: gateway on Redis against its peers', '',
            `Medians of ${p.rounds} interleaved rounds. Ratios of median req/s; "better stock" = the stock assembly (plain, or with ioredis auto-pipelining) with more req/s on that workload. CPU in µs per request, process + Redis. Spread = the largest (max − min) ÷ median over the rounds of any row: how noisy the workload's rounds were (req/s / process CPU).`, '',
            '| workload | gateway ÷ better stock | gateway ÷ bare proxy | CPU µs/req: gateway | stock | stock + auto-pipelining | bare proxy | Redis cmds/req: gateway / stock / stock + AP | decisions per script call (gateway) | spread req/s / CPU | load average at start |',
            '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
            ...summaryMd, '']),
      '## Targets', '', '| target | value | holds |', '|---|---:|:---:|',
      ...[...checks, ...scaleChecks].map((c) => `| ${c.target} | ${Number.isFinite(c.value) ? c.value : 'n/a'} | ${c.ok ? 'yes' : '**no**'} |`), ''
    ]
    mkdirSync(RESULTS_DIR, { recursive: true })
    // A run of the tracing rows alone does not replace the full run's results.
    const results = tracingOnly ? 'tracing' : 'latest'
    writeFileSync(join(RESULTS_DIR, `${results}.md`), [...head, ...md, ''].join('\n'))
    writeFileSync(join(RESULTS_DIR, `${results}.json`), `${JSON.stringify(report, null, 2)}\n`)
    log([...head, ...md].join('\n'))
    log(`\nwritten to ${join(RESULTS_DIR, `${results}.md`)} and ${results}.json in ${report.durationSeconds} s`)
  } finally {
    await webhooks?.close()
    await stopAll()
    rmSync(work, { recursive: true, force: true })
  }
}

function mkdirAndReturn (dir: string): string {
  mkdirSync(dir, { recursive: true })
  return dir
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) await main()
