// `npm run bench:slow-backend`: issue 26's finding 2 at full size — a backend answering every request
// after 5 s, 500 clients in a closed loop, the gateway's 64 upstream connections and its 10 s
// upstream budget. Before the budget was end to end, every client got a 200 after a median of 40 s.
// Reports, per gateway, the answers by status and the latency of each kind. BENCH_BASELINE=<dir>
// runs another checkout's gateway first (before/after). Writes bench/results/slow-backend.md.
// Env: SLOW_CLIENTS [500] SLOW_BACKEND_MS [5000] SLOW_SECONDS [40]
import { createServer, type Server } from 'node:http'
import { cpus, loadavg } from 'node:os'
import { performance } from 'node:perf_hooks'
import { Pool } from 'undici'
import { percentile } from './lib/load.js'
import { stop } from './lib/processes.js'
import { intFromEnv, log, round1, writeResults } from './lib/report.js'
import { finishBench, prepareBench, startGateway, type BenchSetup, type Target } from './lib/targets.js'

export const DEFAULT_CLIENTS = 500
export const DEFAULT_BACKEND_MS = 5_000
export const DEFAULT_SECONDS = 40
/** Longer than any answer can take (budget 10 s); a client waiting longer counts an error. */
const CLIENT_TIMEOUT_MS = 120_000

/** The slow backend: every request answered `[]` after `ms`, whatever it is. */
async function slowBackend (ms: number): Promise<{ url: string, server: Server }> {
  const server = createServer((_req, res) => {
    setTimeout(() => { res.writeHead(200, { 'content-type': 'application/json' }); res.end('[]') }, ms)
  })
  server.keepAliveTimeout = 120_000
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, server }
}

interface Outcome { status: number, ms: number }

/** `clients` closed loops for `seconds`; the requests still out at the end are awaited (their answers are bounded). */
async function closedLoops (target: Target, clients: number, seconds: number): Promise<{ outcomes: Outcome[], errors: number, elapsedS: number }> {
  const pool = new Pool(target.url, { connections: clients, headersTimeout: CLIENT_TIMEOUT_MS, bodyTimeout: CLIENT_TIMEOUT_MS })
  const outcomes: Outcome[] = []
  let errors = 0
  const begun = performance.now()
  const end = begun + seconds * 1000
  await Promise.all(Array.from({ length: clients }, async () => {
    while (performance.now() < end) {
      const started = performance.now()
      try {
        const res = await pool.request({ path: '/v1/pets', method: 'GET', headers: { authorization: 'Bearer bench-key-0' } })
        await res.body.dump()
        outcomes.push({ status: res.statusCode, ms: performance.now() - started })
      } catch {
        errors++
      }
    }
  }))
  const elapsedS = (performance.now() - begun) / 1000
  await pool.close()
  return { outcomes, errors, elapsedS }
}

function summary (name: string, outcomes: Outcome[], errors: number, seconds: number): { name: string, line: string } {
  const byStatus = new Map<number, number[]>()
  for (const o of outcomes) byStatus.set(o.status, [...byStatus.get(o.status) ?? [], o.ms])
  const cells = [...byStatus].sort((a, b) => a[0] - b[0]).map(([status, ms]) => {
    const sorted = ms.sort((a, b) => a - b)
    return `${status}: ${sorted.length} (${round1(sorted.length / seconds)}/s), p50 ${round1(percentile(sorted, 50))} ms, p99 ${round1(percentile(sorted, 99))} ms, max ${round1(sorted[sorted.length - 1] ?? NaN)} ms`
  })
  const all = outcomes.map((o) => o.ms).sort((a, b) => a - b)
  return { name, line: `| ${name} | ${outcomes.length} | ${round1(percentile(all, 50))} | ${round1(percentile(all, 99))} | ${cells.join('; ')} | ${errors} |` }
}

async function main (): Promise<void> {
  const clients = intFromEnv('SLOW_CLIENTS', DEFAULT_CLIENTS)
  const backendMs = intFromEnv('SLOW_BACKEND_MS', DEFAULT_BACKEND_MS)
  const seconds = intFromEnv('SLOW_SECONDS', DEFAULT_SECONDS)
  const begun = Date.now()
  const loadAtStart = loadavg()
  let setup: BenchSetup | undefined
  const backend = await slowBackend(backendMs)
  try {
    setup = await prepareBench('slow-backend', 1)
    const baseline = process.env.BENCH_BASELINE
    const gateways = [
      ...(baseline === undefined || baseline === '' ? [] : [{ name: 'gateway (baseline)', root: baseline }]),
      { name: 'gateway', root: undefined }
    ]
    const rows: string[] = []
    for (const g of gateways) {
      const target = await startGateway(g.name, { configDir: setup.configDir, backendUrl: backend.url, cpus: setup.serverCpus, root: g.root })
      log(`${g.name}: ${clients} clients for ${seconds} s against a backend answering after ${backendMs} ms`)
      const { outcomes, errors, elapsedS } = await closedLoops(target, clients, seconds)
      const row = summary(g.name, outcomes, errors, elapsedS)
      log(row.line)
      rows.push(row.line)
      if (target.child !== undefined) await stop(target.child)
    }
    writeResults('slow-backend', [
      '# A slow backend behind the gateway (issue 26, finding 2)', '',
      `${new Date().toISOString()} · ${cpus().length} × ${cpus()[0]?.model ?? 'CPU'} · Node ${process.version} · load average at start ${loadAtStart.map((l) => l.toFixed(1)).join(' ')}, at end ${loadavg().map((l) => l.toFixed(1)).join(' ')} · ${Math.round((Date.now() - begun) / 1000)} s`, '',
      `A backend answering every request after ${backendMs} ms; ${clients} clients, each sending GET /v1/pets again as soon as it has an answer, for ${seconds} s (the requests out at the end are awaited; rates are over the whole time until the last answer). ` +
      'Gateway defaults: 64 upstream connections, UPSTREAM_TIMEOUT_MS 10 s, in-process store. Latency: from sending to the last byte.', '',
      '| gateway | answers | p50 ms | p99 ms | by status: count, rate, latency | client errors |', '|---|---:|---:|---:|---|---:|',
      ...rows, ''
    ])
  } finally {
    await finishBench(setup)
    backend.server.closeAllConnections()
    backend.server.close()
  }
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) await main()
