// `npm run bench`: the gateway measured side by side with its peers in one run, so the targets of
// the performance issue are ratios from the same machine and minute, not absolute figures from
// different days. Starts the backend, one Redis and every server under test as child processes on
// loopback (autocannon alone runs here), runs the configurations interleaved A B C … A B C … with
// the order reversed every other round, and writes medians and ratios to bench/results/latest.md
// (+ latest.json). Sections:
//   throughput   direct backend · bare @fastify/http-proxy · gateway (in-process store) ·
//                gateway (Redis, info logs, metrics: what users run) · stock assembly
//                (@fastify/http-proxy + @fastify/rate-limit on the same Redis) · gateway, 2 workers
//   latency      p99 added over direct at a constant rate (default 2,000 req/s)
//   redis        commands per request (INFO commandstats before/after), memory per active key
//   scale        req/s against keys in config (10, 10k, 100k) and distinct keys in traffic (1, 1k, 100k)
// Env: BENCH_SECONDS [5] BENCH_ROUNDS [3] BENCH_CONNECTIONS [32] BENCH_RATE [2000]
//      BENCH_QUICK=1 (2 s runs, no scale section: ~1 min) BENCH_SCALE=0|1 (force the scale section off/on)
import type { ChildProcess } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { DAY_WINDOW, MINUTE_WINDOW } from '../src/gateway/limiter/arithmetic.js'
import { writeConfigWithKeys } from './config-load.js'
import { fixedRate, median, throughput, type RateRun, type Run } from './lib/load.js'
import {
  commandCalls, commandDelta, firstLine, freePort, REPO_ROOT, startBackend, startNode, startRedis, stop, stopAll,
  unboundPlans, waitForHttp, writeSingleKeyConfig, type RedisServer
} from './lib/processes.js'

export const DEFAULT_SECONDS = 5
export const DEFAULT_QUICK_SECONDS = 2
export const DEFAULT_ROUNDS = 3
export const DEFAULT_CONNECTIONS = 32
export const DEFAULT_WARMUP_SECONDS = 2
export const DEFAULT_RATE = 2_000
/** Connections of the constant-rate run: enough that 2,000 req/s never queue behind each other. */
export const DEFAULT_RATE_CONNECTIONS = 16
export const DEFAULT_PATH = '/v1/pets?limit=10'
export const SEEDED_PETS = 20
export const CONFIG_KEY_COUNTS = [10, 10_000, 100_000] as const
export const ACTIVE_KEY_COUNTS = [1, 1_000, 100_000] as const
/** Ids whose Redis keys are sized with MEMORY USAGE after the scale runs. */
export const MEMORY_SAMPLE_IDS = 200

const RESULTS_DIR = join(REPO_ROOT, 'bench', 'results')

interface Target { name: string, url: string, child: ChildProcess, tokens: string[] }

function intFromEnv (name: string, fallback: number): number {
  const raw = process.env[name]
  return raw === undefined || raw === '' ? fallback : Number.parseInt(raw, 10)
}

const log = (line: string): void => { process.stdout.write(`${line}\n`) }
const round3 = (x: number): number => Math.round(x * 1000) / 1000

async function startPrinting (name: string, script: string, args: string[], tokens: string[]): Promise<Target> {
  const child = startNode([join(REPO_ROOT, script), ...args], { stdout: 'pipe' })
  const { port } = JSON.parse(await firstLine(child)) as { port: number }
  return { name, url: `http://127.0.0.1:${port}`, child, tokens }
}

interface GatewayChild { configDir: string, backendUrl: string, redisUrl?: string, workers?: number, logLevel?: string }

/** The real entry point (src/gateway/server.ts), configured from the environment as users run it. */
async function startGateway (name: string, opts: GatewayChild, tokens: string[]): Promise<Target> {
  const port = await freePort()
  const child = startNode([join(REPO_ROOT, 'src', 'gateway', 'server.ts')], {
    env: {
      GATEWAY_HOST: '127.0.0.1',
      GATEWAY_PORT: String(port),
      ADMIN_HOST: '127.0.0.1',
      ADMIN_PORT: String(await freePort()),
      BACKEND_URL: opts.backendUrl,
      CONFIG_DIR: opts.configDir,
      CONFIG_WATCH: 'false',
      LOG_LEVEL: opts.logLevel ?? 'info',
      REDIS_URL: opts.redisUrl ?? '',
      REDIS_CLUSTER_NODES: '',
      REDIS_SENTINELS: '',
      GATEWAY_WORKERS: String(opts.workers ?? 1),
      NODE_ENV: 'bench'
    }
  })
  const url = `http://127.0.0.1:${port}`
  await waitForHttp(`${url}/healthz-not-a-route`)
  return { name, url, child, tokens }
}

async function seed (backendUrl: string): Promise<void> {
  for (let i = 0; i < SEEDED_PETS; i++) {
    const res = await fetch(`${backendUrl}/v1/pets`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: `pet-${i}`, categoryId: 1 })
    })
    await res.arrayBuffer()
    if (res.status !== 201) throw new Error(`seeding answered ${res.status}`)
  }
}

/** Checks one request through a target is a 200 before it is measured (a bench of 401s measures nothing). */
async function assertServes (target: Target): Promise<void> {
  const res = await fetch(`${target.url}${DEFAULT_PATH}`, { headers: { authorization: `Bearer ${target.tokens[0] ?? ''}` } })
  await res.arrayBuffer()
  if (res.status !== 200) throw new Error(`${target.name} answered ${res.status}`)
}

interface Params { seconds: number, rounds: number, connections: number, warmup: number, rate: number }

/** Interleaved rounds over `targets`, order reversed every other round; every run fed to `onRun`. */
async function interleave (targets: Target[], p: Params, onRun: (target: Target, round: number) => Promise<Run>): Promise<Map<string, Run[]>> {
  const runs = new Map<string, Run[]>(targets.map((t) => [t.name, []]))
  for (let round = 0; round < p.rounds; round++) {
    const order = round % 2 === 0 ? targets : [...targets].reverse()
    for (const target of order) {
      const run = await onRun(target, round)
      runs.get(target.name)?.push(run)
      log(`  round ${round + 1}/${p.rounds}  ${target.name.padEnd(34)} ${run.requestsPerSecond.toFixed(0).padStart(7)} req/s  p50 ${run.latencyP50Ms.toFixed(2)} ms  p99 ${run.latencyP99Ms.toFixed(2)} ms  non-2xx ${run.non2xx}  errors ${run.errors}`)
    }
  }
  return runs
}

interface Row { name: string, rps: number, p50: number, p99: number, non2xx: number, errors: number, rounds: number[] }

function summarize (runs: Map<string, Run[]>): Row[] {
  return [...runs].map(([name, rs]) => ({
    name,
    rps: Math.round(median(rs.map((r) => r.requestsPerSecond))),
    p50: median(rs.map((r) => r.latencyP50Ms)),
    p99: median(rs.map((r) => r.latencyP99Ms)),
    non2xx: rs.reduce((a, r) => a + r.non2xx, 0),
    errors: rs.reduce((a, r) => a + r.errors, 0),
    rounds: rs.map((r) => Math.round(r.requestsPerSecond))
  }))
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
 * MEMORY USAGE of one id's state at its largest, written in the script's own layout (redisKeys():
 * rings as hashes of bucket → count plus 't', the ban and escalation strings, the list of recent
 * 429s at most threshold + 1 long), then deleted.
 */
async function worstCaseKeyBytes (redis: RedisServer): Promise<number> {
  const base = 'rl:{bench-worst-case}:'
  const ring = (slots: number, count: number): string[] => ['t', String(1_000_000_000 + slots), ...Array.from({ length: slots }, (_, i) => [String(i), String(count)]).flat()]
  await redis.cli('HSET', `${base}m`, ...ring(MINUTE_WINDOW.slots, 5_000))
  await redis.cli('HSET', `${base}d`, ...ring(DAY_WINDOW.slots, 200_000))
  await redis.cli('SET', `${base}ban`, String(Date.now() + 86_400_000))
  await redis.cli('SET', `${base}esc`, '5')
  await redis.cli('RPUSH', `${base}rej`, ...Array.from({ length: 31 }, () => String(Date.now())))
  let bytes = 0
  for (const suffix of ['m', 'd', 'ban', 'esc', 'rej']) bytes += Number(await redis.cli('MEMORY', 'USAGE', `${base}${suffix}`, 'SAMPLES', '0'))
  await redis.cli('DEL', ...['m', 'd', 'ban', 'esc', 'rej'].map((s) => `${base}${s}`))
  return bytes
}

async function main (): Promise<void> {
  const quick = process.env.BENCH_QUICK === '1'
  const p: Params = {
    seconds: intFromEnv('BENCH_SECONDS', quick ? DEFAULT_QUICK_SECONDS : DEFAULT_SECONDS),
    rounds: Math.max(3, intFromEnv('BENCH_ROUNDS', DEFAULT_ROUNDS)),
    connections: intFromEnv('BENCH_CONNECTIONS', DEFAULT_CONNECTIONS),
    warmup: quick ? 1 : DEFAULT_WARMUP_SECONDS,
    rate: intFromEnv('BENCH_RATE', DEFAULT_RATE)
  }
  const scale = process.env.BENCH_SCALE === undefined || process.env.BENCH_SCALE === '' ? !quick : process.env.BENCH_SCALE === '1'
  const begun = Date.now()
  const work = mkdtempSync(join(tmpdir(), 'petstore-bench-'))
  const stopOnSignal = (): void => { void stopAll().then(() => process.exit(130)) }
  process.once('SIGINT', stopOnSignal)
  process.once('SIGTERM', stopOnSignal)
  const report: Record<string, unknown> = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', node: process.version, loadAverageAtStart: loadavg() },
    params: { ...p, path: DEFAULT_PATH, quick, scale, loadGenerator: 'autocannon (in the bench process)' }
  }
  const md: string[] = []
  try {
    const redis = await startRedis(work)
    const { url: backendUrl } = await startBackend(work)
    await seed(backendUrl)
    const single = writeSingleKeyConfig(mkdirAndReturn(join(work, 'config-single')))
    const tokens = [single.key]

    // ---- throughput ------------------------------------------------------------------------
    log(`throughput: ${p.rounds} rounds × ${p.seconds} s, ${p.connections} connections, GET ${DEFAULT_PATH}`)
    const targets: Target[] = [
      { name: 'direct backend', url: backendUrl, child: undefined as unknown as ChildProcess, tokens },
      await startPrinting('bare @fastify/http-proxy', 'bench/servers/bare-proxy.ts', [backendUrl], tokens),
      await startGateway('gateway, in-process store', { configDir: single.dir, backendUrl }, tokens),
      await startGateway('gateway, Redis', { configDir: single.dir, backendUrl, redisUrl: redis.url }, tokens),
      await startPrinting('stock: http-proxy + rate-limit (Redis)', 'bench/servers/stock.ts', [backendUrl, redis.url], tokens),
      await startGateway('gateway, Redis, 2 workers', { configDir: single.dir, backendUrl, redisUrl: redis.url, workers: 2 }, tokens)
    ]
    for (const t of targets) await assertServes(t)
    for (const t of targets) await throughput({ url: `${t.url}${DEFAULT_PATH}`, seconds: p.warmup, connections: p.connections, tokens: t.tokens })
    const commands: Record<string, { requests: number, clientCommands: number, usec: number, calls: Record<string, number> }> = {}
    const runs = await interleave(targets, p, async (t) => {
      const before = await commandCalls(redis)
      const run = await throughput({ url: `${t.url}${DEFAULT_PATH}`, seconds: p.seconds, connections: p.connections, tokens: t.tokens })
      const delta = commandDelta(before, await commandCalls(redis))
      const acc = commands[t.name] ?? { requests: 0, clientCommands: 0, usec: 0, calls: {} }
      acc.requests += run.total
      acc.clientCommands += delta.sent
      acc.usec += delta.usec
      for (const [name, n] of Object.entries(delta.calls)) acc.calls[name] = (acc.calls[name] ?? 0) + n
      commands[t.name] = acc
      return run
    })
    const rows = summarize(runs)
    const direct = 'direct backend'
    const bare = 'bare @fastify/http-proxy'
    const gwRedis = 'gateway, Redis'
    const stock = 'stock: http-proxy + rate-limit (Redis)'
    const ratios = {
      redisOverDirect: ratio(rows, gwRedis, direct),
      redisOverStock: ratio(rows, gwRedis, stock),
      redisOverBare: ratio(rows, gwRedis, bare),
      memoryOverBare: ratio(rows, 'gateway, in-process store', bare),
      bareOverDirect: ratio(rows, bare, direct),
      stockOverBare: ratio(rows, stock, bare),
      twoWorkersOverOne: ratio(rows, 'gateway, Redis, 2 workers', gwRedis)
    }
    const perRequest = Object.fromEntries(Object.entries(commands)
      .filter(([, c]) => Object.keys(c.calls).length > 0)
      .map(([name, c]) => [name, {
        total: round3(c.clientCommands / c.requests),
        redisCpuUsPerRequest: round3(c.usec / c.requests),
        byCommand: Object.fromEntries(Object.entries(c.calls).map(([cmd, n]) => [cmd, round3(n / c.requests)]))
      }]))
    report.throughput = { rows, ratios, redisCommandsPerRequest: perRequest }

    md.push('## Throughput (GET /v1/pets?limit=10, closed loop)', '',
      `${p.rounds} interleaved rounds × ${p.seconds} s, ${p.connections} connections; medians. Ratio columns: this row ÷ the named row.`, '',
      '| configuration | req/s | p50 ms | p99 ms | ÷ direct | ÷ bare proxy | ÷ stock | non-2xx | errors |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|')
    for (const r of rows) {
      md.push(`| ${r.name} | ${r.rps} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${ratio(rows, r.name, direct).ofMedians.toFixed(2)} | ${ratio(rows, r.name, bare).ofMedians.toFixed(2)} | ${ratio(rows, r.name, stock).ofMedians.toFixed(2)} | ${r.non2xx} | ${r.errors} |`)
    }
    md.push('', `GATEWAY_WORKERS=2 ÷ 1 (Redis): ${ratios.twoWorkersOverOne.ofMedians.toFixed(2)} — on ${cpus().length} cores already shared by the backend, Redis and autocannon, a second worker has no idle core to use.`)
    md.push('', 'Redis per request (INFO before/after each run): commands the client sent (EVALSHA and any other command not run inside a script), Redis CPU (commandstats `usec` of those; a script\'s includes its inner calls), and every call commandstats counts, scripts\' inner calls included:', '')
    for (const [name, c] of Object.entries(perRequest)) md.push(`- ${name}: ${c.total} command(s), ${c.redisCpuUsPerRequest} µs of Redis CPU (${Object.entries(c.byCommand).map(([cmd, n]) => `${cmd} ${n}`).join(', ')})`)

    // ---- latency at a constant rate --------------------------------------------------------
    log(`latency: ${p.rate} req/s constant, ${p.rounds} rounds × ${p.seconds} s`)
    const latencyTargets = targets.filter((t) => t.name === direct || t.name === gwRedis || t.name === bare)
    const rateRuns = new Map<string, RateRun[]>(latencyTargets.map((t) => [t.name, []]))
    await interleave(latencyTargets, p, async (t) => {
      const run = await fixedRate({ url: `${t.url}${DEFAULT_PATH}`, seconds: p.seconds, connections: DEFAULT_RATE_CONNECTIONS, tokens: t.tokens, rate: p.rate })
      rateRuns.get(t.name)?.push(run)
      return run
    })
    const latencyRows = [...rateRuns].map(([name, rs]) => ({
      name,
      achievedRps: Math.round(median(rs.map((r) => r.requestsPerSecond))),
      p50: round3(median(rs.map((r) => r.latencyP50Ms))),
      p90: round3(median(rs.map((r) => r.latencyP90Ms))),
      p99: round3(median(rs.map((r) => r.latencyP99Ms))),
      p999: round3(median(rs.map((r) => r.latencyP999Ms))),
      p99Rounds: rs.map((r) => round3(r.latencyP99Ms))
    }))
    const directLatency = latencyRows.find((r) => r.name === direct)
    const addedP99 = (name: string): number => round3((latencyRows.find((r) => r.name === name)?.p99 ?? NaN) - (directLatency?.p99 ?? NaN))
    report.latency = { rate: p.rate, rows: latencyRows, addedP99Ms: { [gwRedis]: addedP99(gwRedis), [bare]: addedP99(bare) } }
    md.push('', `## Latency at a constant ${p.rate} req/s`, '',
      `${DEFAULT_RATE_CONNECTIONS} connections, exact per-request latencies (ms); medians of ${p.rounds} rounds.`, '',
      '| configuration | achieved req/s | p50 | p90 | p99 | p99.9 | p99 added over direct |', '|---|---:|---:|---:|---:|---:|---:|')
    for (const r of latencyRows) md.push(`| ${r.name} | ${r.achievedRps} | ${r.p50} | ${r.p90} | ${r.p99} | ${r.p999} | ${r.name === direct ? '—' : addedP99(r.name).toFixed(3)} |`)

    for (const t of targets) if (t.child !== undefined) await stop(t.child)

    // ---- scale -----------------------------------------------------------------------------
    let scaleReport: Record<string, unknown> | undefined
    if (scale) {
      log(`scale: keys in config ${CONFIG_KEY_COUNTS.join(' / ')}, active keys ${ACTIVE_KEY_COUNTS.join(' / ')}`)
      const dirs = CONFIG_KEY_COUNTS.map((n) => {
        const dir = writeConfigWithKeys(n, mkdirAndReturn(join(work, `config-${n}`)))
        unboundPlans(dir)
        return dir
      })
      const largest = CONFIG_KEY_COUNTS[CONFIG_KEY_COUNTS.length - 1] ?? 0
      const allTokens = Array.from({ length: largest }, (_, i) => `bench-key-${i}`)
      const byConfig: Target[] = []
      for (const [i, n] of CONFIG_KEY_COUNTS.entries()) {
        byConfig.push(await startGateway(`config ${n.toLocaleString('en')} keys, 1 active`, { configDir: dirs[i] ?? '', backendUrl, redisUrl: redis.url }, ['bench-key-0']))
      }
      const big = byConfig[byConfig.length - 1]
      if (big === undefined) throw new Error('no gateway')
      const byActive: Target[] = ACTIVE_KEY_COUNTS.map((n) => ({
        name: `config ${largest.toLocaleString('en')} keys, ${n.toLocaleString('en')} active (rotating)`,
        url: big.url,
        child: big.child,
        tokens: n === 1 ? ['bench-key-0', 'bench-key-0'] : allTokens.slice(0, n)
      }))
      const scaleTargets = [...byConfig, ...byActive]
      for (const t of byConfig) await assertServes(t)
      for (const t of scaleTargets) await throughput({ url: `${t.url}${DEFAULT_PATH}`, seconds: p.warmup, connections: p.connections, tokens: t.tokens })
      const memoryBefore = Number(/used_memory:(\d+)/.exec(await redis.cli('INFO', 'memory'))?.[1] ?? NaN)
      const keysBefore = Number(await redis.cli('DBSIZE'))
      const scaleRuns = await interleave(scaleTargets, p, async (t) => await throughput({ url: `${t.url}${DEFAULT_PATH}`, seconds: p.seconds, connections: p.connections, tokens: t.tokens }))
      const scaleRows = summarize(scaleRuns)
      const memoryAfter = Number(/used_memory:(\d+)/.exec(await redis.cli('INFO', 'memory'))?.[1] ?? NaN)
      const keysAfter = Number(await redis.cli('DBSIZE'))
      const sample = await memoryPerKey(redis, allTokens.slice(0, MEMORY_SAMPLE_IDS).map((_, i) => `key-${i}`))
      const worst = await worstCaseKeyBytes(redis)
      const configRatio = ratio(scaleRows, byConfig[byConfig.length - 1]?.name ?? '', byConfig[0]?.name ?? '')
      scaleReport = {
        rows: scaleRows,
        config100kOver10: configRatio,
        memory: { ...sample, worstCaseBytes: worst, redisKeysAddedDuringScaleRuns: keysAfter - keysBefore, usedMemoryDeltaBytes: memoryAfter - memoryBefore }
      }
      md.push('', '## Scale', '', 'Gateway on Redis (info logs, metrics). Keys in config: one active key. Active keys: tokens used in turn, one per request, against the 100,000-key config (first touches of a key create its Redis state).', '',
        '| configuration | req/s | p50 ms | p99 ms | ÷ first row | non-2xx |', '|---|---:|---:|---:|---:|---:|')
      for (const r of scaleRows) md.push(`| ${r.name} | ${r.rps} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${ratio(scaleRows, r.name, scaleRows[0]?.name ?? '').ofMedians.toFixed(2)} | ${r.non2xx} |`)
      md.push('', `- 100,000 vs 10 keys in config: ${configRatio.ofMedians.toFixed(3)} (ratio of medians), ${configRatio.medianOfRounds.toFixed(3)} (median of per-round ratios).`,
        `- Redis memory per active key: worst case ${worst} bytes (both rings full — 61 minute and 97 day buckets — plus a ban, its escalation and a full list of recent 429s, written in the script's layout); as found after the runs, ${sample.bytesPerActiveKey} bytes in ${sample.redisKeysPerActiveKey} Redis keys (MEMORY USAGE of every key of ${sample.sampled} sampled ids; a minute ring expires 61 s after its last request).`,
        `- Redis keys created during the scale runs: ${keysAfter - keysBefore}; used_memory grew by ${memoryAfter - memoryBefore} bytes (≈ ${Math.round((memoryAfter - memoryBefore) / Math.max(1, (keysAfter - keysBefore) / (sample.redisKeysPerActiveKey || 1)))} bytes per active key).`)
      for (const t of byConfig) await stop(t.child)
    }
    report.scale = scaleReport

    // ---- targets ---------------------------------------------------------------------------
    const directRow = rows.find((r) => r.name === direct)
    const checks = [
      { target: 'gateway (Redis) ≥ 0.40 × direct backend', value: ratios.redisOverDirect.ofMedians, ok: ratios.redisOverDirect.ofMedians >= 0.40 },
      { target: 'gateway (Redis) ≥ 1.2 × stock assembly', value: ratios.redisOverStock.ofMedians, ok: ratios.redisOverStock.ofMedians >= 1.2 },
      { target: 'gateway (Redis) ≥ 0.85 × bare proxy', value: ratios.redisOverBare.ofMedians, ok: ratios.redisOverBare.ofMedians >= 0.85 },
      { target: `p99 added over direct ≤ 1 ms at ${p.rate} req/s`, value: addedP99(gwRedis), ok: addedP99(gwRedis) <= 1 },
      { target: 'Redis commands per request = 1 (evalsha)', value: perRequest[gwRedis]?.total ?? NaN, ok: Math.abs((perRequest[gwRedis]?.total ?? NaN) - 1) < 0.01 }
    ]
    const scaleChecks = scaleReport === undefined
      ? []
      : [
          { target: '100k vs 10 keys in config within 5 %', value: (scaleReport.config100kOver10 as { ofMedians: number }).ofMedians, ok: Math.abs((scaleReport.config100kOver10 as { ofMedians: number }).ofMedians - 1) <= 0.05 },
          { target: 'Redis memory per active key ≤ 2 KB (worst case)', value: (scaleReport.memory as { worstCaseBytes: number }).worstCaseBytes, ok: (scaleReport.memory as { worstCaseBytes: number }).worstCaseBytes <= 2048 }
        ]
    report.targets = [...checks, ...scaleChecks]
    report.durationSeconds = Math.round((Date.now() - begun) / 1000)
    report.machine = { ...(report.machine as object), loadAverageAtEnd: loadavg() }
    const failing = [...rows, ...((scaleReport?.rows as Row[] | undefined) ?? [])].filter((r) => r.non2xx > 0 || r.errors > 0)
    const head = [
      '# Gateway benchmark — latest run', '',
      `${new Date().toISOString()} · ${cpus().length} × ${cpus()[0]?.model ?? 'CPU'} · Node ${process.version} · load average at start ${(loadavg()).map((l) => l.toFixed(1)).join(' ')} · ${report.durationSeconds} s`, '',
      `**Read ratios, not absolute figures.** Everything runs on this machine's ${cpus().length} cores at once: the backend, Redis, the server under test and autocannon compete for them, so absolute req/s are far below what each would do alone; the comparison is kept fair instead (same backend and Redis, same path, same connections and duration, interleaved rounds with alternating order). Direct backend: ${directRow?.rps ?? '?'} req/s.`, '',
      ...(failing.length === 0 ? [] : [`**Invalid run: non-2xx answers or errors in ${failing.map((r) => r.name).join('; ')}** — their figures measure errors, not the proxy path.`, '']),
      '## Targets', '', '| target | value | holds |', '|---|---:|:---:|',
      ...[...checks, ...scaleChecks].map((c) => `| ${c.target} | ${Number.isFinite(c.value) ? c.value : 'n/a'} | ${c.ok ? 'yes' : '**no**'} |`), ''
    ]
    mkdirSync(RESULTS_DIR, { recursive: true })
    writeFileSync(join(RESULTS_DIR, 'latest.md'), [...head, ...md, ''].join('\n'))
    writeFileSync(join(RESULTS_DIR, 'latest.json'), `${JSON.stringify(report, null, 2)}\n`)
    log([...head, ...md].join('\n'))
    log(`\nwritten to ${join(RESULTS_DIR, 'latest.md')} and latest.json in ${report.durationSeconds} s`)
  } finally {
    await stopAll()
    rmSync(work, { recursive: true, force: true })
  }
}

function mkdirAndReturn (dir: string): string {
  mkdirSync(dir, { recursive: true })
  return dir
}

await main()
