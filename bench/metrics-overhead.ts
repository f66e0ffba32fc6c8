// What per-request metrics cost: requests/s of two identical gateways, one with metrics on and one
// with them off, in front of one backend, each in its own process so autocannon (this process) does
// not share their event loop. Rounds interleave the two and alternate which goes first, so drift of
// a shared machine hits both alike. Two paths: `proxied` (a backend call, what clients do) and
// `edge` (a 404 the gateway answers itself: the smallest request, hence the largest relative cost).
//   npm run bench:metrics            BENCH_ROUNDS, BENCH_SECONDS, BENCH_CONNECTIONS override the defaults
// Writes bench/results/metrics-overhead.json.
import type { ChildProcess } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'
import { buildAdmin } from '../src/gateway/admin/app.js'
import { ReadinessRegistry } from '../src/gateway/runtime/readiness.js'
import { buildGateway } from '../src/gateway/app.js'
import { loadConfigDir } from '../src/gateway/config/read-files.js'
import { createGatewayMetrics } from '../src/gateway/observability/metrics/registry.js'
import { ANONYMOUS_PLAN, UNMATCHED_ROUTE } from '../src/shared/labels.js'
import { firstLine, REPO_ROOT, startBackend, startNode, writeSingleKeyConfig } from './lib/processes.js'

export const DEFAULT_ROUNDS = 3
export const DEFAULT_SECONDS = 5
export const DEFAULT_CONNECTIONS = 32
export const DEFAULT_WARMUP_SECONDS = 2
export const DEFAULT_MICRO_ITERATIONS = 2_000_000

const RESULTS_FILE = join(REPO_ROOT, 'bench', 'results', 'metrics-overhead.json')

interface Served { port: number, adminPort: number }
interface Child { process: ChildProcess, served: Served }

function intFromEnv (name: string, fallback: number): number {
  const raw = process.env[name]
  return raw === undefined || raw === '' ? fallback : Number.parseInt(raw, 10)
}

/** Child mode: one gateway (and its admin app) on free loopback ports; prints them as one JSON line. */
async function serve (metrics: boolean, backendUrl: string, configDir: string): Promise<void> {
  const readiness = new ReadinessRegistry()
  const app = await buildGateway({ config: loadConfigDir(configDir), backendUrl, metrics, logger: false, readiness })
  const admin = await buildAdmin({ gateway: app, readiness })
  await app.listen({ host: '127.0.0.1', port: 0 })
  await admin.listen({ host: '127.0.0.1', port: 0 })
  const served: Served = {
    port: (app.server.address() as { port: number }).port,
    adminPort: (admin.server.address() as { port: number }).port
  }
  process.stdout.write(`${JSON.stringify(served)}\n`)
  process.once('SIGTERM', () => { void Promise.all([app.close(), admin.close()]).then(() => process.exit(0)) })
}

async function startGatewayChild (metrics: boolean, backendUrl: string, configDir: string): Promise<Child> {
  const child = startNode([join(REPO_ROOT, 'bench', 'metrics-overhead.ts'), 'serve', metrics ? 'on' : 'off', backendUrl, configDir], { stdout: 'pipe' })
  return { process: child, served: JSON.parse(await firstLine(child)) as Served }
}

interface Run { requestsPerSecond: number, latencyP50Ms: number, latencyP99Ms: number, non2xx: number, errors: number }

async function load (url: string, key: string, seconds: number, connections: number): Promise<Run> {
  const result = await autocannon({ url, connections, duration: seconds, headers: { authorization: `Bearer ${key}` } })
  return {
    requestsPerSecond: result.requests.average,
    latencyP50Ms: result.latency.p50,
    latencyP99Ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors
  }
}

const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length
const median = (xs: number[]): number => {
  const sorted = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid] ?? NaN : ((sorted[mid - 1] ?? NaN) + (sorted[mid] ?? NaN)) / 2
}

/**
 * CPU time of the per-request metrics work alone (what the onResponse hook does for a proxied
 * request: one request count, two histogram observations), in ns, over a realistic mix of label
 * sets. Unlike req/s on a shared machine, this barely moves between runs.
 */
function hotPathNanoseconds (iterations: number): number {
  const metrics = createGatewayMetrics({ plans: ['free', 'pro', 'business', 'enterprise'], defaultMetrics: false })
  const routes = ['/v1/pets', '/v1/pets/:petId', '/v1/store/orders', UNMATCHED_ROUTE]
  const plans = ['free', 'pro', 'business', 'enterprise', ANONYMOUS_PLAN]
  const statuses = [200, 200, 200, 404, 429, 201]
  const record = (i: number): void => {
    const route = routes[i % routes.length] ?? UNMATCHED_ROUTE
    metrics.requests.count(route, 'GET', plans[i % plans.length] ?? ANONYMOUS_PLAN, statuses[i % statuses.length] ?? 200)
    metrics.requestDuration.observe(route, 0.0012)
    metrics.upstreamDuration.observe(route, 0.0008)
  }
  for (let i = 0; i < 100_000; i++) record(i)
  const started = process.hrtime.bigint()
  for (let i = 0; i < iterations; i++) record(i)
  return Number(process.hrtime.bigint() - started) / iterations
}

async function main (): Promise<void> {
  const rounds = intFromEnv('BENCH_ROUNDS', DEFAULT_ROUNDS)
  const seconds = intFromEnv('BENCH_SECONDS', DEFAULT_SECONDS)
  const connections = intFromEnv('BENCH_CONNECTIONS', DEFAULT_CONNECTIONS)
  const work = mkdtempSync(join(tmpdir(), 'petstore-bench-'))
  const children: ChildProcess[] = []
  try {
    const configDir = join(work, 'config')
    mkdirSync(configDir)
    const { key } = writeSingleKeyConfig(configDir)
    const backend = await startBackend(work)
    const backendUrl = backend.url
    children.push(backend.child)

    const gateways: Record<'on' | 'off', Child> = {
      on: await startGatewayChild(true, backendUrl, configDir),
      off: await startGatewayChild(false, backendUrl, configDir)
    }
    children.push(gateways.on.process, gateways.off.process)
    const base = (which: 'on' | 'off'): string => `http://127.0.0.1:${gateways[which].served.port}`
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`${base('on')}/v1/pets`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `pet-${i}`, categoryId: 1 })
      })
      if (res.status !== 201) throw new Error(`seeding answered ${res.status}`)
      await res.arrayBuffer()
    }

    const scenarios = { proxied: '/v1/pets?limit=10', edge: '/v1/no-such-route' } as const
    const runs: Record<string, Record<'on' | 'off', Run[]>> = {}
    for (const [name, path] of Object.entries(scenarios)) {
      runs[name] = { on: [], off: [] }
      for (const which of ['on', 'off'] as const) await load(`${base(which)}${path}`, key, DEFAULT_WARMUP_SECONDS, connections)
    }
    for (let round = 0; round < rounds; round++) {
      for (const [name, path] of Object.entries(scenarios)) {
        const order = round % 2 === 0 ? ['on', 'off'] as const : ['off', 'on'] as const
        for (const which of order) {
          const run = await load(`${base(which)}${path}`, key, seconds, connections)
          runs[name]?.[which].push(run)
          process.stdout.write(`round ${round + 1}/${rounds} ${name.padEnd(7)} metrics ${which.padEnd(3)} ${run.requestsPerSecond.toFixed(0).padStart(7)} req/s  p50 ${run.latencyP50Ms} ms  p99 ${run.latencyP99Ms} ms  non-2xx ${run.non2xx}  errors ${run.errors}\n`)
        }
      }
    }

    const round3 = (x: number): number => Math.round(x * 1000) / 1000
    const hotPathNs = Math.round(hotPathNanoseconds(DEFAULT_MICRO_ITERATIONS))
    const summary: Record<string, { onRequestsPerSecond: number, offRequestsPerSecond: number, ratio: number, medianRoundRatio: number, estimatedRatioFromHotPath: number }> = {}
    for (const [name, byMode] of Object.entries(runs)) {
      const on = mean(byMode.on.map((r) => r.requestsPerSecond))
      const off = mean(byMode.off.map((r) => r.requestsPerSecond))
      const perRound = byMode.on.map((r, i) => r.requestsPerSecond / (byMode.off[i]?.requestsPerSecond ?? NaN))
      // One request costs about 1/off seconds of gateway CPU when the gateway is the bottleneck.
      const estimated = 1 / (1 + hotPathNs * 1e-9 * off)
      summary[name] = {
        onRequestsPerSecond: Math.round(on),
        offRequestsPerSecond: Math.round(off),
        ratio: round3(on / off),
        medianRoundRatio: round3(median(perRound)),
        estimatedRatioFromHotPath: round3(estimated)
      }
    }
    const scrape = await (await fetch(`http://127.0.0.1:${gateways.on.served.adminPort}/metrics`)).text()
    const counted = [...scrape.matchAll(/^gateway_requests_total\{[^}]*\} (\d+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0)

    const report = {
      date: new Date().toISOString(),
      machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', node: process.version },
      params: { rounds, seconds, connections, warmupSeconds: DEFAULT_WARMUP_SECONDS, scenarios, logger: false },
      loadAverage: loadavg(),
      hotPathNsPerRequest: hotPathNs,
      summary,
      requestsCountedByMetricsGateway: counted,
      runs
    }
    mkdirSync(join(REPO_ROOT, 'bench', 'results'), { recursive: true })
    writeFileSync(RESULTS_FILE, `${JSON.stringify(report, null, 2)}\n`)
    process.stdout.write('\nmetrics on / off (mean req/s over the rounds)\n')
    for (const [name, s] of Object.entries(summary)) {
      process.stdout.write(`  ${name.padEnd(7)} on ${String(s.onRequestsPerSecond).padStart(7)}  off ${String(s.offRequestsPerSecond).padStart(7)}  ratio ${s.ratio.toFixed(3)}  median of rounds ${s.medianRoundRatio.toFixed(3)}  from hot-path cost ${s.estimatedRatioFromHotPath.toFixed(3)}\n`)
    }
    process.stdout.write(`  hot path: ${hotPathNs} ns of metrics work per request; load average ${loadavg().map((l) => l.toFixed(1)).join(' ')} on ${cpus().length} CPUs\n`)
    process.stdout.write(`  gateway_requests_total on the metrics gateway: ${counted}\n  written to ${RESULTS_FILE}\n`)
  } finally {
    for (const child of children) child.kill('SIGTERM')
    await Promise.all(children.map((c) => c.exitCode !== null ? undefined : new Promise((resolve) => c.once('exit', resolve))))
    rmSync(work, { recursive: true, force: true })
  }
}

if (process.argv[2] === 'serve') {
  await serve(process.argv[3] === 'on', process.argv[4] ?? '', process.argv[5] ?? '')
} else {
  await main()
}
