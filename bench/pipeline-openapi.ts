// Issue 39 row 6 at full size: a pipelined flood of big responses, and a victim meanwhile. wrk, one
// thread, 200 connections from 127.0.0.1, each pipelining 60 × `GET /v1/openapi.json` (~220 KB
// each, free: no key), closed loop, against a gateway process with its defaults. Meanwhile a
// victim on other source addresses sends ordinary keyed `GET /v1/pets?limit=1`: some on kept-alive
// connections (reopened when closed), some on a new connection each (a client arriving during the
// attack, which waits in the accept queue behind whatever the attacker reconnects). Each victim
// request is timed from send to the end of its answer. Target: every victim request answered,
// worst ≤ 500 ms, p99 ≤ 200 ms. To tell where a victim's time went, each round also reports the
// gateway's own view of the victim's route (gateway_request_duration_seconds and the backend's
// part, as counts under 0.25/0.5/1 s), the gateway's loop lag, this process's own loop lag (the
// victims' client), the longest a victim's request sat unread in the gateway's receive queue and
// the longest accept queue over the port's listening sockets (both sampled with `ss`: wrk's 200
// connections, opened at once, waited there for seconds while libuv accepted one per turn, and a
// victim's connection behind them), the gateway's CPU and the connection and shed counters.
// Bounded: ROW6_SECONDS per round (wrk killed 10 s after), loopback only.
//   node --import ./src/ts-resolve.ts bench/pipeline-openapi.ts   Env: ROW6_SECONDS [15] ROW6_ROUNDS [2]
//   BENCH_BASELINE=<checkout> (another checkout's gateway measured alongside) BENCH_PIN [1]
// Writes bench/results/pipeline-openapi.md and .json.
import { execFile } from 'node:child_process'
import { cpus, loadavg } from 'node:os'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { parseScrape } from '../test/helpers/scrape.js'
import { percentileOf, victimKeptAlive, victimOnNewConnections, type VictimResult } from '../test/helpers/victim.js'
import { cpuMicros } from './lib/proc-cpu.js'
import { intFromEnv, round1, writeResults } from './lib/report.js'
import { beforeAfter } from './lib/before-after.js'
import { REST_CPUS, type Target } from './lib/targets.js'
import { wrkAvailable, wrkWithScript } from './lib/wrk.js'

const CONNECTIONS = 200
const DEPTH = 60
const PATH = '/v1/openapi.json'
/** Victim requests per second on each kind of connection, and how many of each. */
const VICTIM_RATE = 10
const VICTIM_CONNECTIONS = 2
/** The victims start this long after wrk (its connections opening is not the steady state) and stop this long before it ends. */
const MARGIN_S = 2
/** The victims' source addresses: kept-alive, then a new connection per request. */
const KEPT_ALIVE_PREFIX = '127.0.120.'
const NEW_CONNECTION_PREFIX = '127.0.121.'
const VICTIM_PREFIXES = [KEPT_ALIVE_PREFIX, NEW_CONNECTION_PREFIX]

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

async function wrkPipelined (url: string, seconds: number): ReturnType<typeof wrkWithScript> {
  return await wrkWithScript(url, seconds, { script: PIPELINE_LUA, connections: CONNECTIONS, cpus: REST_CPUS, extraArgs: ['--timeout', '5s'], tmpPrefix: 'petstore-row6-' })
}

const COUNTERS = ['gateway_connections_refused_total', 'gateway_connections_reclaimed_total', 'gateway_connections_unused_closed_total', 'gateway_connections_closed_over_limit_total', 'gateway_shed_requests_total', 'gateway_requests_total'] as const

/** prom-client's loop-lag gauges, over the time since the previous scrape (its histogram is reset on each). */
const LOOP_LAG: readonly string[] = ['nodejs_eventloop_lag_max_seconds', 'nodejs_eventloop_lag_p99_seconds', 'nodejs_eventloop_lag_p50_seconds']

/** Duration buckets (s) read for the victim's route: under 0.25 s, 0.5 s, 1 s, and all. */
const VICTIM_BUCKETS: readonly string[] = ['0.25', '0.5', '1', '+Inf']

/** The connection counters now, summed over their labels, and the loop lag since the last scrape. */
async function counters (adminUrl: string): Promise<Record<string, number>> {
  const samples = parseScrape(await (await fetch(`${adminUrl}/metrics`)).text())
  const out: Record<string, number> = {}
  for (const s of samples) {
    if (LOOP_LAG.includes(s.name)) out[s.name.replace('nodejs_eventloop_lag_', 'loopLag_').replace('_seconds', 'Ms')] = round1(s.value * 1000)
    // The victim's route only (the flood's is another): how long the gateway itself took, and the backend.
    if ((s.name === 'gateway_request_duration_seconds_bucket' || s.name === 'gateway_upstream_duration_seconds_bucket') && s.labels.route === '/v1/pets' && VICTIM_BUCKETS.includes(s.labels.le ?? '')) {
      out[`${s.name.startsWith('gateway_request') ? 'victimInGateway' : 'victimInBackend'}_le${s.labels.le ?? ''}`] = s.value
    }
    if (!(COUNTERS as readonly string[]).includes(s.name)) continue
    const label = s.labels.reason ?? s.labels.status
    const key = `${s.name.replace('gateway_', '').replace('_total', '')}${label === undefined ? '' : `_${label}`}`
    out[key] = (out[key] ?? 0) + s.value
  }
  return out
}

const UNREAD_SAMPLE_MS = 200

/** What the `ss` samples showed: see unreadAndQueued. */
interface SocketSamples {
  /** The longest run of samples in which a victim's request sat unread in the gateway's receive queue (ms). */
  unreadMs: number
  /** The most connections seen waiting to be accepted, over all the port's listening sockets. */
  acceptQueueMax: number
}

/**
 * While `during` runs, samples (`ss`) the gateway's port every UNREAD_SAMPLE_MS: the longest run of
 * samples in which a victim's request sat unread in the gateway's receive queue (Recv-Q > 0) — time
 * the gateway did not read a socket that had a request, which its handler's own durations cannot
 * show — and the longest accept queue (a listening socket's Recv-Q: connections the kernel
 * completed and the gateway has not accepted; a victim's connection waits behind them, and
 * connections waiting there show as established with their request unread). Null without `ss`.
 */
async function unreadAndQueued (port: number, during: Promise<unknown>): Promise<SocketSamples | null> {
  let running = true
  void during.finally(() => { running = false })
  const streaks = new Map<string, number>()
  let longest = 0
  let acceptQueueMax = 0
  while (running) {
    const out = await new Promise<string | null>((resolve) => {
      execFile('ss', ['-tnH', 'state', 'established', 'state', 'listening', `( sport = :${port} )`], { timeout: 2_000 }, (err, stdout) => { resolve(err === null ? stdout : null) })
    })
    if (out === null) return null
    const unread = new Set<string>()
    let queued = 0
    for (const line of out.split('\n')) {
      // With two states asked for, each line starts with its state.
      const [state, recvQ, , , peer] = line.trim().split(/\s+/)
      if (state === 'LISTEN') {
        queued += Number(recvQ)
        continue
      }
      if (peer !== undefined && VICTIM_PREFIXES.some((p) => peer.startsWith(p)) && Number(recvQ) > 0) unread.add(peer)
    }
    if (queued > acceptQueueMax) acceptQueueMax = queued
    for (const peer of [...streaks.keys()]) if (!unread.has(peer)) streaks.delete(peer)
    for (const peer of unread) {
      const streak = (streaks.get(peer) ?? 0) + 1
      streaks.set(peer, streak)
      if (streak > longest) longest = streak
    }
    await new Promise((resolve) => setTimeout(resolve, UNREAD_SAMPLE_MS))
  }
  return { unreadMs: longest * UNREAD_SAMPLE_MS, acceptQueueMax }
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
  const cpuBefore = cpuMicros(t.pid)
  // This process (the victims' client) shares its CPU with wrk: its own stalls are in every victim time.
  const clientLag = monitorEventLoopDelay({ resolution: 10 })
  clientLag.enable()
  const flood = wrkPipelined(`${t.url}${PATH}`, seconds)
  await new Promise((resolve) => setTimeout(resolve, MARGIN_S * 1000))
  const victimSeconds = seconds - 2 * MARGIN_S
  const perConnection = Math.round(victimSeconds * VICTIM_RATE / VICTIM_CONNECTIONS)
  const opts = { count: perConnection, intervalMs: 1000 * VICTIM_CONNECTIONS / VICTIM_RATE, key: 'bench-key-1' }
  const victimsDone = Promise.all([
    Promise.all(Array.from({ length: VICTIM_CONNECTIONS }, async (_, i) => await victimKeptAlive(target, `${KEPT_ALIVE_PREFIX}${i + 1}`, opts))),
    Promise.all(Array.from({ length: VICTIM_CONNECTIONS }, async (_, i) => await victimOnNewConnections(target, `${NEW_CONNECTION_PREFIX}${i + 1}`, opts)))
  ])
  const [[keptAlive, fresh], sampled] = await Promise.all([victimsDone, unreadAndQueued(port, victimsDone)])
  const wrk = await flood
  const cpu = cpuMicros(t.pid) - cpuBefore
  clientLag.disable()
  const after = await counters(t.adminUrl ?? '')
  const all = merge([...keptAlive, ...fresh])
  return {
    name: t.name,
    round,
    victim: shape(all),
    victimKeptAlive: shape(merge(keptAlive)),
    victimNewConnections: shape(merge(fresh)),
    flood: { requestsPerSecond: Math.round(wrk.requestsPerSecond), total: wrk.total, non2xx: wrk.non2xx, socketErrors: wrk.errorsByKind ?? {} },
    gatewayCpuPercent: round1(100 * cpu / (seconds * 1e6)),
    victimRequestUnreadInGatewayMaxMs: sampled?.unreadMs ?? null,
    acceptQueueMax: sampled?.acceptQueueMax ?? null,
    victimClientLoopLag: { p99Ms: round1(clientLag.percentile(99) / 1e6), maxMs: round1(clientLag.max / 1e6) },
    counters: Object.fromEntries(Object.entries(after).map(([k, v]) => [k, k.startsWith('loopLag_') ? v : v - (before[k] ?? 0)])),
    loadAverage: round1(loadavg()[0] ?? 0)
  }
}

async function main (): Promise<void> {
  if (!wrkAvailable()) throw new Error('wrk is not installed (apt-get install wrk)')
  const seconds = intFromEnv('ROW6_SECONDS', 15)
  const rounds = intFromEnv('ROW6_ROUNDS', 2)
  const { runs, setup, begun, loadAtStart } = await beforeAfter('pipeline-openapi', rounds, async (target, round) => await measure(target, seconds, round))
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
