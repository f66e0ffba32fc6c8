// `npm run bench:shadow`: what an admin read of a plan's shadow records costs the shared Redis when
// many consumers are in them (issue 33, row 4). Two gateway processes (the real entry point) on one
// redis-server; the shadow records of BENCH_CONSUMERS consumers of plan `free` (default 300,000, one
// hour each, spread over the last 24 h, ten heavy ones on top) written through the history store of
// the checkout under test; then, alternated BENCH_ROUNDS times for BENCH_SECONDS each, a probe at
// BENCH_RATE requests/s through gateway A alone ("quiet") and the same probe while
// `GET /admin/plans/free/shadow?top=5` is read back to back on gateway B's admin port ("reads").
// Per phase: the probe's p50 / p99 / max and non-200 answers, the admin reads' latencies and
// statuses, gateway A's limiter store errors and whether its fallback was ever active (scraped every
// 250 ms), and the Redis commands the phase ran (calls and µs per call, INFO commandstats).
// BENCH_BASELINE=<dir> (src/ of an older commit with node_modules linked in): that checkout is
// measured first, the same way. Writes bench/results/shadow-read.json.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { Redis } from 'ioredis'
import type * as RedisHistoryModule from '../src/gateway/history/redis-history.js'
import type { ShadowCell } from '../src/gateway/history/tally.js'
import { parseScrape, sampleValue } from '../test/helpers/scrape.js'
import { openProbe, type ProbeResult } from './lib/probe.js'
import { commandCalls, commandDelta, REPO_ROOT, startBackend, startRedis, stop, stopAll, writeSingleKeyConfig, type RedisServer } from './lib/processes.js'
import { seed, startGateway, type Target } from './lib/targets.js'

const HOUR_MS = 3_600_000
const WRITE_BATCH = 10_000
const MAX_READS_PER_PHASE = 2_000
const READ_PATH = '/admin/plans/free/shadow?top=5'

const intFromEnv = (name: string, fallback: number): number => {
  const raw = process.env[name]
  return raw === undefined || raw === '' ? fallback : Number.parseInt(raw, 10)
}

const pct = (sorted: readonly number[], p: number): number => Math.round((sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? NaN) * 10) / 10

/** Consumer i's cell: one of the last 24 hours; the first ten are the heavy ones a top 5 must find. */
function cell (i: number, nowHour: number): ShadowCell {
  const hour = nowHour - (i % 24)
  const rejections = i < 10 ? 100_000 - i * 1_000 : 1 + (i * 7_919) % 50
  const first = hour * HOUR_MS + (i % 3_000) * 1_000
  return { plan: 'free', consumerId: `c-${i}`, hour, rejections, admitted: rejections, first, last: first + 500 }
}

async function populate (root: string, redis: RedisServer, consumers: number): Promise<{ ms: number, usedMemoryMb: number }> {
  const { createRedisHistory } = await import(join(root, 'src', 'gateway', 'history', 'redis-history.ts')) as typeof RedisHistoryModule
  const history = createRedisHistory(new Redis(redis.url))
  const nowHour = Math.floor(Date.now() / HOUR_MS)
  const started = performance.now()
  for (let from = 0; from < consumers; from += WRITE_BATCH) {
    const shadow = Array.from({ length: Math.min(WRITE_BATCH, consumers - from) }, (_, k) => cell(from + k, nowHour))
    const left = await history.write({ usage: [], shadow, months: [] })
    if (left.shadow.length > 0) throw new Error(`${left.shadow.length} cells not written`)
  }
  const ms = Math.round(performance.now() - started)
  await history.close()
  const info = await redis.cli('INFO', 'memory')
  return { ms, usedMemoryMb: Math.round(Number(/used_memory:(\d+)/.exec(info)?.[1] ?? NaN) / 1e5) / 10 }
}

/** Gateway A's limiter health over a phase: store errors added, and whether the fallback was ever active. */
function watchLimiter (adminUrl: string): { stop: () => Promise<{ storeErrors: number, fallbackActive: boolean }> } {
  let first: number | undefined
  let last = 0
  let fallback = false
  let running = true
  const loop = (async () => {
    while (running) {
      try {
        const samples = parseScrape(await (await fetch(`${adminUrl}/metrics`)).text())
        const errors = sampleValue(samples, 'gateway_store_errors_total') ?? 0
        first ??= errors
        last = errors
        if ((sampleValue(samples, 'gateway_store_fallback_active') ?? 0) > 0) fallback = true
      } catch { /* a scrape that failed says nothing */ }
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
  })()
  return { stop: async () => { running = false; await loop; return { storeErrors: last - (first ?? last), fallbackActive: fallback } } }
}

async function readLoop (adminUrl: string, until: () => boolean): Promise<{ latencies: number[], statuses: Record<string, number> }> {
  const latencies: number[] = []
  const statuses: Record<string, number> = {}
  for (let i = 0; i < MAX_READS_PER_PHASE && !until(); i++) {
    const started = performance.now()
    const res = await fetch(`${adminUrl}${READ_PATH}`)
    await res.arrayBuffer()
    latencies.push(performance.now() - started)
    statuses[res.status] = (statuses[res.status] ?? 0) + 1
  }
  return { latencies: latencies.sort((a, b) => a - b), statuses }
}

/** Redis answers PING within 10 ms again (what an earlier phase left queued in it has run). */
async function settled (redis: RedisServer): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const started = performance.now()
    await redis.cli('PING')
    if (performance.now() - started < 50) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

function probeSummary (r: ProbeResult): Record<string, number> {
  return { sent: r.sent, p50Ms: pct(r.latencies, 0.5), p99Ms: pct(r.latencies, 0.99), maxMs: pct(r.latencies, 1), non200: r.sent - (r.statuses['200'] ?? 0), errors: r.errors }
}

async function measure (name: string, root: string, opts: { consumers: number, rounds: number, seconds: number, rate: number }): Promise<Record<string, unknown>> {
  const work = mkdtempSync(join(tmpdir(), 'petstore-shadow-read-'))
  const gateways: Target[] = []
  try {
    const redis = await startRedis(work)
    const { url: backendUrl } = await startBackend(work)
    await seed(backendUrl)
    const { dir: configDir, key } = writeSingleKeyConfig(mkdtempSync(join(work, 'config-')))
    for (const label of ['A', 'B']) gateways.push(await startGateway(`${name} ${label}`, { root, configDir, backendUrl, redisUrl: redis.url, logLevel: 'warn' }))
    const [a, b] = gateways as [Target, Target]
    const populated = await populate(root, redis, opts.consumers)
    const keys = Number(await redis.cli('DBSIZE'))
    const probe = await openProbe(`${a.url}/v1/pets?limit=10`, key)
    await probe.run(opts.rate, 2) // warm-up
    const phases: Array<Record<string, unknown>> = []
    for (let round = 0; round < opts.rounds; round++) {
      for (const kind of ['quiet', 'reads'] as const) {
        await settled(redis)
        const health = watchLimiter(a.adminUrl ?? '')
        const before = await commandCalls(redis)
        let done = false
        const reads = kind === 'reads' ? readLoop(b.adminUrl ?? '', () => done) : undefined
        const probed = await probe.run(opts.rate, opts.seconds)
        done = true
        const read = await reads
        const commands = commandDelta(before, await commandCalls(redis))
        const after = await commandCalls(redis)
        const usecPerCall = Object.fromEntries(['zunion', 'zrange', 'zmscore', 'hmget', 'pfcount', 'evalsha'].filter((c) => commands.calls[c] !== undefined)
          .map((c) => [c, { calls: commands.calls[c], usecPerCall: Math.round(((after.usec.get(c) ?? 0) - (before.usec.get(c) ?? 0)) / (commands.calls[c] ?? 1)) }]))
        phases.push({
          round,
          kind,
          probe: probeSummary(probed),
          limiter: await health.stop(),
          ...(read === undefined ? {} : { adminReads: { count: read.latencies.length, statuses: read.statuses, p50Ms: pct(read.latencies, 0.5), p99Ms: pct(read.latencies, 0.99), maxMs: pct(read.latencies, 1) } }),
          redisCommands: usecPerCall
        })
        process.stderr.write(`${name} round ${round} ${kind}: ${JSON.stringify(phases.at(-1))}\n`)
      }
    }
    await probe.close()
    return { name, root, consumers: opts.consumers, populate: populated, redisKeys: keys, phases }
  } finally {
    for (const g of gateways) if (g.child !== undefined) await stop(g.child)
    await stopAll()
    rmSync(work, { recursive: true, force: true })
  }
}

async function main (): Promise<void> {
  const opts = {
    consumers: intFromEnv('BENCH_CONSUMERS', 300_000),
    rounds: intFromEnv('BENCH_ROUNDS', 2),
    seconds: intFromEnv('BENCH_SECONDS', 10),
    rate: intFromEnv('BENCH_RATE', 100)
  }
  const baseline = process.env.BENCH_BASELINE
  const runs = []
  if (baseline !== undefined && baseline !== '') runs.push(await measure('baseline', baseline, opts))
  runs.push(await measure('current', REPO_ROOT, opts))
  const report = { date: new Date().toISOString(), ...opts, readPath: READ_PATH, runs }
  mkdirSync(join(REPO_ROOT, 'bench', 'results'), { recursive: true })
  writeFileSync(join(REPO_ROOT, 'bench', 'results', 'shadow-read.json'), `${JSON.stringify(report, null, 2)}\n`)
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`)
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) await main()
