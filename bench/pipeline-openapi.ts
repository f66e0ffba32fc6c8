// Issue 39 row 6 at full size: a pipelined flood of big responses, and a victim meanwhile. wrk, one
// thread, 200 connections from 127.0.0.1, each pipelining 60 × `GET /v1/openapi.json` (~220 KB
// each, free: no key), closed loop, against a gateway process with its defaults. Meanwhile a
// victim on other source addresses sends ordinary keyed `GET /v1/pets?limit=1`: some on kept-alive
// connections (reopened when closed), some on a new connection each (a client arriving during the
// attack, which waits in the accept queue behind whatever the attacker reconnects). Each victim
// request is timed from send to the end of its answer. Target: every victim request answered,
// worst ≤ 500 ms, p99 ≤ 200 ms. Bounded: ROW6_SECONDS per round (wrk killed 10 s after), loopback only.
//   node --import tsx bench/pipeline-openapi.ts   Env: ROW6_SECONDS [15] ROW6_ROUNDS [2]
//   BENCH_BASELINE=<checkout> (another checkout's gateway measured alongside) BENCH_PIN [1]
// Writes bench/results/pipeline-openapi.md and .json.
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseScrape } from '../test/helpers/scrape.js'
import { percentileOf, victimKeptAlive, victimOnNewConnections, type VictimResult } from '../test/helpers/victim.js'
import { taskset } from './lib/proc-cpu.js'
import { REPO_ROOT, stop } from './lib/processes.js'
import { intFromEnv, log, round1, writeResults } from './lib/report.js'
import { finishBench, prepareBench, REST_CPUS, startGateway, type BenchSetup, type Target } from './lib/targets.js'
import { parseWrk, wrkAvailable } from './lib/wrk.js'

const CONNECTIONS = 200
const DEPTH = 60
const PATH = '/v1/openapi.json'
/** Victim requests per second on each kind of connection, and how many of each. */
const VICTIM_RATE = 10
const VICTIM_CONNECTIONS = 2
const KILL_GRACE_MS = 10_000
/** The victims start this long after wrk (its connections opening is not the steady state) and stop this long before it ends. */
const MARGIN_S = 2

const PIPELINE_LUA = [
  'local batch',
  'init = function(args)',
  '  local r = {}',
  `  for i = 1, ${DEPTH} do r[i] = wrk.format("GET", "${PATH}") end`,
  '  batch = table.concat(r)',
  'end',
  'request = function() return batch end',
  ''
].join('\n')

async function wrkPipelined (url: string, seconds: number): Promise<ReturnType<typeof parseWrk> & { raw: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-row6-'))
  const script = join(dir, 'pipeline.lua')
  writeFileSync(script, PIPELINE_LUA)
  const args = ['-t1', `-c${CONNECTIONS}`, `-d${seconds}s`, '--timeout', '5s', '-s', script, url]
  const pin = taskset()
  const [command, argv] = pin === null ? ['wrk', args] : [pin, ['-c', REST_CPUS, 'wrk', ...args]]
  try {
    const raw = await new Promise<string>((resolve, reject) => {
      execFile(command, argv, { timeout: seconds * 1000 + KILL_GRACE_MS, maxBuffer: 1 << 20 }, (err, stdout) => { if (err !== null) reject(err); else resolve(stdout) })
    })
    return { ...parseWrk(raw), raw }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

const COUNTERS = ['gateway_connections_refused_total', 'gateway_connections_reclaimed_total', 'gateway_connections_unused_closed_total', 'gateway_connections_closed_over_limit_total', 'gateway_shed_requests_total', 'gateway_requests_total'] as const

/** The connection counters now, summed over their labels. */
async function counters (adminUrl: string): Promise<Record<string, number>> {
  const samples = parseScrape(await (await fetch(`${adminUrl}/metrics`)).text())
  const out: Record<string, number> = {}
  for (const s of samples) {
    if (!(COUNTERS as readonly string[]).includes(s.name)) continue
    const label = s.labels.reason ?? s.labels.status
    const key = `${s.name.replace('gateway_', '').replace('_total', '')}${label === undefined ? '' : `_${label}`}`
    out[key] = (out[key] ?? 0) + s.value
  }
  return out
}

function merge (results: VictimResult[]): { sent: number, answered: number, latencies: number[], statuses: Record<string, number>, failures: Record<string, number>, reconnects: number } {
  const merged = { sent: 0, answered: 0, latencies: [] as number[], statuses: {} as Record<string, number>, failures: {} as Record<string, number>, reconnects: 0 }
  for (const r of results) {
    merged.sent += r.sent
    merged.answered += r.answered
    merged.reconnects += r.reconnects
    merged.latencies.push(...r.latencies)
    for (const [k, v] of Object.entries(r.statuses)) merged.statuses[k] = (merged.statuses[k] ?? 0) + v
    for (const [k, v] of Object.entries(r.failures)) merged.failures[k] = (merged.failures[k] ?? 0) + v
  }
  merged.latencies.sort((a, b) => a - b)
  return merged
}

function shape (v: ReturnType<typeof merge>): Record<string, unknown> {
  return {
    answered: v.answered,
    sent: v.sent,
    p50Ms: round1(percentileOf(v.latencies, 50)),
    p99Ms: round1(percentileOf(v.latencies, 99)),
    maxMs: round1(percentileOf(v.latencies, 100)),
    statuses: v.statuses,
    failures: v.failures,
    reconnects: v.reconnects
  }
}

async function measure (t: Target, seconds: number, round: number): Promise<Record<string, unknown>> {
  const port = Number(new URL(t.url).port)
  const target = { host: '127.0.0.1', port }
  const before = await counters(t.adminUrl ?? '')
  const flood = wrkPipelined(`${t.url}${PATH}`, seconds)
  await new Promise((resolve) => setTimeout(resolve, MARGIN_S * 1000))
  const victimSeconds = seconds - 2 * MARGIN_S
  const perConnection = Math.round(victimSeconds * VICTIM_RATE / VICTIM_CONNECTIONS)
  const opts = { count: perConnection, intervalMs: 1000 * VICTIM_CONNECTIONS / VICTIM_RATE, key: 'bench-key-1' }
  const [keptAlive, fresh] = await Promise.all([
    Promise.all(Array.from({ length: VICTIM_CONNECTIONS }, async (_, i) => await victimKeptAlive(target, `127.0.120.${i + 1}`, opts))),
    Promise.all(Array.from({ length: VICTIM_CONNECTIONS }, async (_, i) => await victimOnNewConnections(target, `127.0.121.${i + 1}`, opts)))
  ])
  const wrk = await flood
  const after = await counters(t.adminUrl ?? '')
  const all = merge([...keptAlive, ...fresh])
  return {
    name: t.name,
    round,
    victim: shape(all),
    victimKeptAlive: shape(merge(keptAlive)),
    victimNewConnections: shape(merge(fresh)),
    flood: { requestsPerSecond: Math.round(wrk.requestsPerSecond), total: wrk.total, non2xx: wrk.non2xx, socketErrors: wrk.errorsByKind ?? {} },
    connectionCounters: Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - (before[k] ?? 0)])),
    loadAverage: round1(loadavg()[0] ?? 0)
  }
}

async function main (): Promise<void> {
  if (!wrkAvailable()) throw new Error('wrk is not installed (apt-get install wrk)')
  const seconds = intFromEnv('ROW6_SECONDS', 15)
  const rounds = intFromEnv('ROW6_ROUNDS', 2)
  const begun = Date.now()
  const loadAtStart = loadavg()
  let setup: BenchSetup | undefined
  const runs: Array<Record<string, unknown>> = []
  try {
    setup = await prepareBench('pipeline-openapi', 2)
    const targets: Target[] = []
    const baseline = process.env.BENCH_BASELINE
    if (baseline !== undefined && baseline !== '') targets.push(await startGateway('before', { configDir: setup.configDir, backendUrl: setup.backendUrl, cpus: setup.serverCpus, root: baseline, logLevel: 'warn' }))
    targets.push(await startGateway('after', { configDir: setup.configDir, backendUrl: setup.backendUrl, cpus: setup.serverCpus, root: REPO_ROOT, logLevel: 'warn' }))
    for (let round = 0; round < rounds; round++) {
      for (const t of round % 2 === 0 ? targets : [...targets].reverse()) {
        const m = await measure(t, seconds, round)
        runs.push(m)
        log(`round ${round + 1} ${t.name}: ${JSON.stringify(m)}`)
      }
    }
    for (const t of targets) if (t.child !== undefined) await stop(t.child)
  } finally {
    await finishBench(setup)
  }
  const cells = (v: Record<string, unknown>): string => `${String(v.answered)}/${String(v.sent)} | ${String(v.p50Ms)} | ${String(v.p99Ms)} | ${String(v.maxMs)}`
  const md = [
    '# Row 6 — 200 connections × 60 pipelined `GET /v1/openapi.json`, and a victim meanwhile', '',
    `${new Date().toISOString()} · ${cpus().length} × ${cpus()[0]?.model ?? 'CPU'} · Node ${process.version} · load average at start ${loadAtStart.map((l) => l.toFixed(1)).join(' ')}, at end ${loadavg().map((l) => l.toFixed(1)).join(' ')} · ${Math.round((Date.now() - begun) / 1000)} s`, '',
    `Flood: wrk, 1 thread, ${CONNECTIONS} connections × ${DEPTH} pipelined ${PATH} (~220 KB each), no key, closed loop, ${seconds} s. ` +
    `Victim: keyed GET /v1/pets?limit=1 from other source addresses, ${VICTIM_RATE}/s on ${VICTIM_CONNECTIONS} kept-alive connections and ${VICTIM_RATE}/s on ${VICTIM_CONNECTIONS} addresses opening a new connection per request, ` +
    `from ${MARGIN_S} s after wrk starts to ${MARGIN_S} s before it ends. ${setup?.pinned === true ? 'Pinned: gateway on CPU 0; backend, wrk and the clients on CPU 1.' : 'Not pinned.'} ` +
    'Target: every victim request answered, worst ≤ 500 ms, p99 ≤ 200 ms.', '',
    '| gateway | round | victim answered | p50 ms | p99 ms | max ms | kept-alive answered | p50 | p99 | max | new-connection answered | p50 | p99 | max | flood answers/s |',
    '|---|---:|---|---:|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---:|',
    ...runs.map((r) => `| ${String(r.name)} | ${Number(r.round) + 1} | ${cells(r.victim as Record<string, unknown>)} | ${cells(r.victimKeptAlive as Record<string, unknown>)} | ${cells(r.victimNewConnections as Record<string, unknown>)} | ${String((r.flood as Record<string, unknown>).requestsPerSecond)} |`),
    '',
    ...runs.map((r) => `- ${String(r.name)} round ${Number(r.round) + 1}: ${JSON.stringify(r)}`),
    ''
  ]
  writeResults('pipeline-openapi', md, { date: new Date().toISOString(), machine: { cpus: cpus().length, node: process.version, loadAverageAtStart: loadAtStart, loadAverageAtEnd: loadavg() }, seconds, rounds, runs })
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) await main()
