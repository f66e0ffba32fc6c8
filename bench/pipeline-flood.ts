// Pipelining cannot starve others, at full size (issue 33 row 2; test/gateway/edge/pipelining.test.ts
// holds the mechanism): wrk with one key, 256 connections × 32 pipelined requests each (a Lua
// script writes 32 requests at a time), closed loop, against a gateway process with its defaults;
// meanwhile a victim on another source address with another key, 20 requests/s on kept-alive
// connections, each timed, and the admin port's /healthz likewise. Target: the victim's p99 ≤
// 200 ms. The key's limits never bind (bench plans), so only the pipeline gate and load shedding
// stand between the flood and the victim.
//   node --import ./src/ts-resolve.ts bench/pipeline-flood.ts   Env: PIPELINE_SECONDS [15] PIPELINE_ROUNDS [2]
//   BENCH_BASELINE=<checkout> (also the gateway of another checkout: `git archive` of an older
//   commit with node_modules linked in) BENCH_PIN [1]
// Writes bench/results/pipeline-flood.md and .json. Loopback only; every run is bounded.
import { cpus, loadavg } from 'node:os'
import { parseScrape } from '../test/helpers/scrape.js'
import { percentileOf, victimKeptAlive, type VictimResult } from '../test/helpers/victim.js'
import { cpuMicros } from './lib/proc-cpu.js'
import { intFromEnv, round1, writeResults } from './lib/report.js'
import { beforeAfter } from './lib/before-after.js'
import { REST_CPUS, type Target } from './lib/targets.js'
import { wrkAvailable, wrkWithScript } from './lib/wrk.js'

const CONNECTIONS = 256
const DEPTH = 32
const VICTIM_RATE = 20
const VICTIM_CONNECTIONS = 4
/** wrk starts first; the victims start this long after it (1,000s of connections opening is not the steady state) and stop before it ends. */
const MARGIN_S = 2

const PIPELINE_LUA = (token: string): string => [
  'local batch',
  'init = function(args)',
  '  local r = {}',
  `  for i = 1, ${DEPTH} do r[i] = wrk.format(nil, nil, { ["Authorization"] = "Bearer ${token}" }) end`,
  '  batch = table.concat(r)',
  'end',
  'request = function() return batch end',
  ''
].join('\n')

async function wrkPipelined (url: string, seconds: number, token: string): ReturnType<typeof wrkWithScript> {
  return await wrkWithScript(url, seconds, { script: PIPELINE_LUA(token), connections: CONNECTIONS, cpus: REST_CPUS, extraArgs: ['--latency'], tmpPrefix: 'petstore-pipeline-' })
}

/** GET /healthz on the admin port at a fixed pace, each timed. */
async function healthProbe (adminUrl: string, count: number, intervalMs: number): Promise<number[]> {
  const times: number[] = []
  const begun = performance.now()
  for (let i = 0; i < count; i++) {
    const wait = begun + i * intervalMs - performance.now()
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
    const started = performance.now()
    try {
      await (await fetch(`${adminUrl}/healthz`)).arrayBuffer()
      times.push(performance.now() - started)
    } catch { /* counted as missing */ }
  }
  return times.sort((a, b) => a - b)
}

const GAUGES = ['gateway_in_flight_requests', 'gateway_concurrency_limit', 'gateway_upstream_queued', 'gateway_queue_delay_seconds'] as const

/** The load gauges now (queue delays in ms, by where). */
async function gauges (adminUrl: string): Promise<Record<string, number>> {
  const samples = parseScrape(await (await fetch(`${adminUrl}/metrics`)).text())
  const out: Record<string, number> = {}
  for (const s of samples) {
    if (!(GAUGES as readonly string[]).includes(s.name)) continue
    if (s.name === 'gateway_queue_delay_seconds') out[`delay_${s.labels.where ?? ''}_ms`] = round1(s.value * 1000)
    else out[s.name.replace('gateway_', '')] = s.value
  }
  return out
}

/** The gauges once a second while `during` runs, as medians. */
async function sampleGauges (adminUrl: string, during: Promise<unknown>): Promise<Record<string, number>> {
  const seen: Array<Record<string, number>> = []
  let running = true
  void during.finally(() => { running = false })
  while (running) {
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    if (running) seen.push(await gauges(adminUrl))
  }
  const keys = [...new Set(seen.flatMap((g) => Object.keys(g)))]
  return Object.fromEntries(keys.map((k) => [k, percentileOf(seen.map((g) => g[k] ?? NaN).sort((a, b) => a - b), 50)]))
}

function victims (results: VictimResult[]): { sent: number, answered: number, latencies: number[], statuses: Record<string, number>, failures: Record<string, number> } {
  const merged = { sent: 0, answered: 0, latencies: [] as number[], statuses: {} as Record<string, number>, failures: {} as Record<string, number> }
  for (const r of results) {
    merged.sent += r.sent
    merged.answered += r.answered
    merged.latencies.push(...r.latencies)
    for (const [k, v] of Object.entries(r.statuses)) merged.statuses[k] = (merged.statuses[k] ?? 0) + v
    for (const [k, v] of Object.entries(r.failures)) merged.failures[k] = (merged.failures[k] ?? 0) + v
  }
  merged.latencies.sort((a, b) => a - b)
  return merged
}

async function measure (t: Target, seconds: number, round: number): Promise<Record<string, unknown>> {
  const url = `${t.url}/v1/pets?limit=10`
  const port = Number(new URL(t.url).port)
  const cpuBefore = cpuMicros(t.pid)
  const flood = wrkPipelined(url, seconds, 'bench-key-0')
  await new Promise((resolve) => setTimeout(resolve, MARGIN_S * 1000))
  const victimSeconds = seconds - 2 * MARGIN_S
  const perConnection = Math.round(victimSeconds * VICTIM_RATE / VICTIM_CONNECTIONS)
  const [victimRuns, health, load] = await Promise.all([
    Promise.all(Array.from({ length: VICTIM_CONNECTIONS }, async (_, i) => await victimKeptAlive({ host: '127.0.0.1', port }, `127.0.110.${i + 1}`,
      { count: perConnection, intervalMs: 1000 * VICTIM_CONNECTIONS / VICTIM_RATE, key: 'bench-key-1' }))),
    healthProbe(t.adminUrl ?? '', victimSeconds * 5, 200),
    sampleGauges(t.adminUrl ?? '', flood)
  ])
  const wrk = await flood
  const cpu = cpuMicros(t.pid) - cpuBefore
  await new Promise((resolve) => setTimeout(resolve, 2_000))
  const v = victims(victimRuns)
  return {
    name: t.name,
    round,
    victim: { sent: v.sent, answered: v.answered, p50Ms: round1(percentileOf(v.latencies, 50)), p99Ms: round1(percentileOf(v.latencies, 99)), maxMs: round1(percentileOf(v.latencies, 100)), statuses: v.statuses, failures: v.failures },
    healthz: { answered: health.length, p50Ms: round1(percentileOf(health, 50)), p99Ms: round1(percentileOf(health, 99)), maxMs: round1(percentileOf(health, 100)) },
    flood: { requestsPerSecond: Math.round(wrk.requestsPerSecond), total: wrk.total, non2xx: wrk.non2xx, socketErrors: wrk.errorsByKind ?? {}, p99Ms: wrk.latencyP99Ms },
    gatewayCpuPercent: round1(100 * cpu / (seconds * 1e6)),
    gaugesDuringFlood: load,
    inFlightAfter: (await gauges(t.adminUrl ?? '')).in_flight_requests
  }
}

async function main (): Promise<void> {
  if (!wrkAvailable()) throw new Error('wrk is not installed (apt-get install wrk)')
  const seconds = intFromEnv('PIPELINE_SECONDS', 15)
  const rounds = intFromEnv('PIPELINE_ROUNDS', 2)
  const { runs, setup, begun, loadAtStart } = await beforeAfter('pipeline-flood', rounds, async (target, round) => await measure(target, seconds, round))
  const fmt = (r: Record<string, unknown>, key: string): string => {
    const v = r[key] as Record<string, unknown>
    return `${String(v.p50Ms)} | ${String(v.p99Ms)} | ${String(v.maxMs)}`
  }
  const md = [
    '# Pipeline flood — 256 connections × 32 pipelined requests, and a victim meanwhile', '',
    `${new Date().toISOString()} · ${cpus().length} × ${cpus()[0]?.model ?? 'CPU'} · Node ${process.version} · load average at start ${loadAtStart.map((l) => l.toFixed(1)).join(' ')}, at end ${loadavg().map((l) => l.toFixed(1)).join(' ')} · ${Math.round((Date.now() - begun) / 1000)} s`, '',
    `GET /v1/pets?limit=10, gateway defaults, in-process store, plans whose limits never bind. Flood: wrk, 1 thread, ${CONNECTIONS} connections × ${DEPTH} pipelined requests, one key, closed loop, ${seconds} s. ` +
    `Victim: another key from other source addresses, ${VICTIM_RATE} requests/s over ${VICTIM_CONNECTIONS} kept-alive connections, from ${MARGIN_S} s after wrk starts to ${MARGIN_S} s before it ends; /healthz on the admin port 5 times/s. ` +
    `${setup?.pinned === true ? 'Pinned: gateway on CPU 0; backend, wrk and the clients on CPU 1.' : 'Not pinned.'} Target: victim p99 ≤ 200 ms.`, '',
    '| gateway | round | victim answered | victim p50 ms | p99 ms | max ms | /healthz p50 ms | p99 ms | max ms | flood answers/s | flood non-2xx | gateway CPU % | in flight after |',
    '|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...runs.map((r) => {
      const v = r.victim as Record<string, unknown>
      const f = r.flood as Record<string, unknown>
      return `| ${String(r.name)} | ${Number(r.round) + 1} | ${String(v.answered)}/${String(v.sent)} | ${fmt(r, 'victim')} | ${fmt(r, 'healthz')} | ${String(f.requestsPerSecond)} | ${String(f.non2xx)} | ${String(r.gatewayCpuPercent)} | ${String(r.inFlightAfter)} |`
    }),
    '',
    ...runs.map((r) => `- ${String(r.name)} round ${Number(r.round) + 1}: ${JSON.stringify(r)}`),
    ''
  ]
  writeResults('pipeline-flood', md, { date: new Date().toISOString(), machine: { cpus: cpus().length, node: process.version, loadAverageAtStart: loadAtStart, loadAverageAtEnd: loadavg() }, seconds, rounds, runs })
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) await main()
