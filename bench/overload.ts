// `npm run bench:overload`: the gateway far over its capacity — wrk with 1,000 connections in a
// closed loop — and what a well-behaved client sees meanwhile: a probe at a modest constant rate,
// each of its answers timed exactly. Without shedding, the excess queues and every request, the
// probe's too, waits behind it; with shedding, the excess is answered 503 at once and the probe's
// latency stays bounded. Configurations run interleaved (A B … B A …) on the in-process store,
// pinned like `npm run bench` (gateway on CPU 0; backend, wrk and the probe on CPU 1). Writes
// bench/results/overload.md and overload.json.
// Env: OVERLOAD_SECONDS [10] OVERLOAD_ROUNDS [3] OVERLOAD_CONNECTIONS [1000] PROBE_RATE [50]
//      OVERLOAD_VARIANTS="name:K=V,K=V;name2:" gateway configurations by environment
//      (default: shedding off, then the defaults) BENCH_PIN [1]
//      OVERLOAD_FLOOR=0 leaves out the reference server that answers 503 to everything at once
//      BENCH_BASELINE=<dir> also another checkout's gateway, first (`git archive` of an older commit
//      with node_modules linked in): "today's" behaviour in the same rounds
import { readFileSync } from 'node:fs'
import { cpus, loadavg } from 'node:os'
import { parseScrape } from '../test/helpers/scrape.js'
import { parseVariants } from './lib/env-list.js'
import { median, percentile, type Run } from './lib/load.js'
import { DEFAULT_PROBE_CONNECTIONS, openProbe } from './lib/probe.js'
import { cpuMicros } from './lib/proc-cpu.js'
import { stop } from './lib/processes.js'
import { intFromEnv, log, round1, writeResults } from './lib/report.js'
import { assertServes, DEFAULT_PATH, finishBench, prepareBench, REST_CPUS, SERVER_CPUS, startGateway, startPrinting, type BenchSetup, type Target } from './lib/targets.js'
import { wrkAvailable, wrkThroughput } from './lib/wrk.js'

export const DEFAULT_OVERLOAD_SECONDS = 10
export const DEFAULT_OVERLOAD_ROUNDS = 3
export const DEFAULT_OVERLOAD_CONNECTIONS = 1_000
/** Probe requests per second: a client well within any plan, sent at fixed times whatever the answers take. */
export const DEFAULT_PROBE_RATE = 50
/** The probe starts this long after wrk (1,000 connections opening is not the steady state) and stops as long before its end. */
export const DEFAULT_PROBE_MARGIN_S = 1
export const DEFAULT_WARMUP_SECONDS = 3
export const DEFAULT_VARIANTS = 'shedding off:SHED_QUEUE_DELAY_MS=0;default:'
/** The probe's target. */
export const PROBE_P99_TARGET_MS = 100
const KEYS = 2
const GAUGE_INTERVAL_MS = 1_000
/** The reference configuration: a server shedding everything at once (bench/servers/shed-all.ts). */
const FLOOR = 'floor: 503 to everything'
const BASELINE = 'before (baseline)'


const GAUGES = ['gateway_concurrency_limit', 'gateway_in_flight_requests', 'gateway_upstream_in_flight', 'gateway_upstream_queued', 'gateway_queue_delay_seconds{where="loop"}', 'gateway_queue_delay_seconds{where="upstream"}'] as const
type Gauges = Record<(typeof GAUGES)[number], number>

/** gateway_requests_total by status, the shed counters and the load gauges, from the admin port. */
interface Durations { requestSum: number, requestCount: number, upstreamSum: number, upstreamCount: number }

async function scrape (adminUrl: string): Promise<{ byStatus: Record<string, number>, shed: Record<string, number>, gauges: Gauges, durations: Durations }> {
  const res = await fetch(`${adminUrl}/metrics`)
  const samples = parseScrape(await res.text())
  const byStatus: Record<string, number> = {}
  const shed: Record<string, number> = {}
  const gauges = Object.fromEntries(GAUGES.map((g) => [g, NaN])) as Gauges
  const durations: Durations = { requestSum: 0, requestCount: 0, upstreamSum: 0, upstreamCount: 0 }
  for (const s of samples) {
    if (s.name === 'gateway_request_duration_seconds_sum') durations.requestSum += s.value
    if (s.name === 'gateway_request_duration_seconds_count') durations.requestCount += s.value
    if (s.name === 'gateway_upstream_duration_seconds_sum') durations.upstreamSum += s.value
    if (s.name === 'gateway_upstream_duration_seconds_count') durations.upstreamCount += s.value
    if (s.name === 'gateway_requests_total') byStatus[s.labels.status ?? ''] = (byStatus[s.labels.status ?? ''] ?? 0) + s.value
    if (s.name === 'gateway_shed_requests_total') shed[s.labels.reason ?? ''] = (shed[s.labels.reason ?? ''] ?? 0) + s.value
    const name = s.labels.where === undefined ? s.name : `${s.name}{where="${s.labels.where}"}`
    if ((GAUGES as readonly string[]).includes(name)) gauges[name as keyof Gauges] = s.value
  }
  return { byStatus, shed, gauges, durations }
}

/**
 * The kernel's count of connections dropped because a listen queue was full (TcpExt ListenDrops):
 * wrk opening 1,000 connections at once overflows the accept backlog, and a dropped SYN is retried
 * after 1 s and 3 s — what wrk then reports as timeouts happened before any request was sent.
 */
function listenDrops (): number {
  try {
    const lines = readFileSync('/proc/net/netstat', 'utf8').split('\n').filter((l) => l.startsWith('TcpExt:'))
    const names = (lines[0] ?? '').split(/\s+/)
    const values = (lines[1] ?? '').split(/\s+/)
    return Number(values[names.indexOf('ListenDrops')] ?? NaN)
  } catch {
    return NaN
  }
}

/** The load gauges once a second while `during` runs, as medians: where the requests were. */
async function sampleGauges<T> (adminUrl: string, during: Promise<T>): Promise<Gauges> {
  const seen: Gauges[] = []
  let running = true
  void during.finally(() => { running = false })
  while (running) {
    await new Promise((resolve) => setTimeout(resolve, GAUGE_INTERVAL_MS))
    if (running) seen.push((await scrape(adminUrl)).gauges)
  }
  return Object.fromEntries(GAUGES.map((g) => [g, median(seen.map((x) => x[g]))])) as Gauges
}

function delta (after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {}
  for (const [k, v] of Object.entries(after)) if (v - (before[k] ?? 0) > 0) out[k] = v - (before[k] ?? 0)
  return out
}

interface Measured {
  name: string
  round: number
  /** Every answer wrk got, per second, and the 2xx among them. */
  rps: number
  okRps: number
  non2xx: number
  socketErrors: number
  socketErrorsByKind: Run['errorsByKind']
  wrkP50: number
  wrkP99: number
  probeP50: number
  probeP99: number
  probeMax: number
  probeStatuses: Record<string, number>
  probeErrors: number
  processUs: number
  statuses: Record<string, number>
  shed: Record<string, number>
  /** Medians of once-a-second readings during the run. */
  gauges: Gauges
  /** Connections the kernel dropped at a full accept queue during the run (machine-wide). */
  listenDrops: number
  /** Every answer's time in the gateway, and the backend's part of those that reached it (means, ms; from the duration histograms). */
  meanRequestMs: number
  meanUpstreamMs: number
}

type Scrape = Awaited<ReturnType<typeof scrape>>
const NOTHING: Scrape = {
  byStatus: {},
  shed: {},
  gauges: Object.fromEntries(GAUGES.map((g) => [g, NaN])) as Gauges,
  durations: { requestSum: 0, requestCount: 0, upstreamSum: 0, upstreamCount: 0 }
}

async function measure (t: Target, p: { seconds: number, connections: number, rate: number }, round: number): Promise<Measured> {
  // The floor has no admin port: its answers are wrk's.
  const read = async (): Promise<Scrape> => t.adminUrl === undefined ? NOTHING : await scrape(t.adminUrl)
  const before = await read()
  const dropsBefore = listenDrops()
  const cpuBefore = cpuMicros(t.pid)
  const probeSeconds = p.seconds - 2 * DEFAULT_PROBE_MARGIN_S
  const probe = await openProbe(`${t.url}${DEFAULT_PATH}`, 'bench-key-1')
  const wrk = wrkThroughput({ url: `${t.url}${DEFAULT_PATH}`, seconds: p.seconds, connections: p.connections, tokens: ['bench-key-0'] })
  const [run, pr, gauges] = await Promise.all([
    wrk,
    (async () => {
      await new Promise((resolve) => setTimeout(resolve, DEFAULT_PROBE_MARGIN_S * 1000))
      return await probe.run(p.rate, probeSeconds)
    })(),
    t.adminUrl === undefined ? NOTHING.gauges : sampleGauges(t.adminUrl, wrk)
  ])
  await probe.close()
  const cpu = cpuMicros(t.pid) - cpuBefore
  const after = await read()
  const statuses = delta(after.byStatus, before.byStatus)
  const meanMs = (sum: keyof Durations, count: keyof Durations): number =>
    1000 * (after.durations[sum] - before.durations[sum]) / Math.max(1, after.durations[count] - before.durations[count])
  const answered = t.adminUrl === undefined ? run.total : Object.values(statuses).reduce((a, b) => a + b, 0)
  return {
    name: t.name,
    round,
    rps: run.requestsPerSecond,
    okRps: (run.total - run.non2xx) / p.seconds,
    non2xx: run.non2xx,
    socketErrors: run.errors,
    socketErrorsByKind: run.errorsByKind,
    wrkP50: run.latencyP50Ms,
    wrkP99: run.latencyP99Ms,
    probeP50: percentile(pr.latencies, 50),
    probeP99: percentile(pr.latencies, 99),
    probeMax: pr.latencies[pr.latencies.length - 1] ?? NaN,
    probeStatuses: pr.statuses,
    probeErrors: pr.errors,
    processUs: cpu / Math.max(1, answered),
    statuses,
    shed: delta(after.shed, before.shed),
    gauges,
    listenDrops: listenDrops() - dropsBefore,
    meanRequestMs: meanMs('requestSum', 'requestCount'),
    meanUpstreamMs: meanMs('upstreamSum', 'upstreamCount')
  }
}

async function main (): Promise<void> {
  if (!wrkAvailable()) throw new Error('wrk is not installed (apt-get install wrk): autocannon cannot drive 1,000 connections from this process without becoming the bottleneck')
  const p = {
    seconds: intFromEnv('OVERLOAD_SECONDS', DEFAULT_OVERLOAD_SECONDS),
    rounds: intFromEnv('OVERLOAD_ROUNDS', DEFAULT_OVERLOAD_ROUNDS),
    connections: intFromEnv('OVERLOAD_CONNECTIONS', DEFAULT_OVERLOAD_CONNECTIONS),
    rate: intFromEnv('PROBE_RATE', DEFAULT_PROBE_RATE)
  }
  const variants = parseVariants(process.env.OVERLOAD_VARIANTS ?? DEFAULT_VARIANTS)
  const begun = Date.now()
  const loadAtStart = loadavg()
  let setup: BenchSetup | undefined
  try {
    setup = await prepareBench('overload', KEYS)
    const { pinned, serverCpus, backendUrl, configDir } = setup
    const targets: Target[] = []
    if (process.env.OVERLOAD_FLOOR !== '0') targets.push(await startPrinting(FLOOR, 'bench/servers/shed-all.ts', [], { cpus: serverCpus }))
    const baseline = process.env.BENCH_BASELINE
    if (baseline !== undefined && baseline !== '') targets.push(await startGateway(BASELINE, { configDir, backendUrl, cpus: serverCpus, root: baseline }))
    for (const v of variants) targets.push(await startGateway(v.name, { configDir, backendUrl, env: v.env, cpus: serverCpus }))
    for (const t of targets) if (t.name !== FLOOR) await assertServes(t, 'bench-key-0')
    log(`overload: ${p.rounds} rounds × ${p.seconds} s, wrk -c${p.connections}, probe ${p.rate}/s; ${targets.map((t) => t.name).join(' · ')}`)
    for (const t of targets) await wrkThroughput({ url: `${t.url}${DEFAULT_PATH}`, seconds: DEFAULT_WARMUP_SECONDS, connections: 50, tokens: ['bench-key-0'] })
    const runs: Measured[] = []
    for (let round = 0; round < p.rounds; round++) {
      for (const t of round % 2 === 0 ? targets : [...targets].reverse()) {
        const m = await measure(t, p, round)
        runs.push(m)
        log(`  round ${round + 1}/${p.rounds}  ${t.name.padEnd(16)} ${m.rps.toFixed(0).padStart(6)} answers/s, ${m.okRps.toFixed(0).padStart(6)} 2xx/s  ` +
          `probe p50 ${m.probeP50.toFixed(1)} p99 ${m.probeP99.toFixed(1)} max ${m.probeMax.toFixed(1)} ms ${JSON.stringify(m.probeStatuses)}  ` +
          `wrk p99 ${m.wrkP99.toFixed(1)} ms  statuses ${JSON.stringify(m.statuses)}  shed ${JSON.stringify(m.shed)}  socket errors ${JSON.stringify(m.socketErrorsByKind ?? {})} (listen drops ${m.listenDrops})  cpu ${m.processUs.toFixed(1)} µs/answer  mean ms: request ${m.meanRequestMs.toFixed(1)}, upstream ${m.meanUpstreamMs.toFixed(1)}  gauges ${JSON.stringify(m.gauges)}`)
      }
    }
    const rows = targets.map((t) => {
      const rs = runs.filter((r) => r.name === t.name)
      const med = (f: (r: Measured) => number): number => median(rs.map(f))
      const sum = (f: (r: Measured) => number): number => rs.reduce((a, r) => a + f(r), 0)
      return {
        name: t.name,
        env: variants.find((v) => v.name === t.name)?.env ?? {},
        rps: Math.round(med((r) => r.rps)),
        okRps: Math.round(med((r) => r.okRps)),
        probeP50: round1(med((r) => r.probeP50)),
        probeP99: round1(med((r) => r.probeP99)),
        probeMax: round1(Math.max(...rs.map((r) => r.probeMax))),
        probeP99Rounds: rs.map((r) => round1(r.probeP99)),
        wrkP99: round1(med((r) => r.wrkP99)),
        non2xx: sum((r) => r.non2xx),
        socketErrors: sum((r) => r.socketErrors),
        probeErrors: sum((r) => r.probeErrors),
        processUs: round1(med((r) => r.processUs)),
        statuses: rs.map((r) => r.statuses),
        shed: rs.map((r) => r.shed),
        probeStatuses: rs.map((r) => r.probeStatuses)
      }
    })
    for (const t of targets) if (t.child !== undefined) await stop(t.child)
    // Round by round against the configuration measured next to it: "today's" (the baseline) when
    // it ran, else shedding off. A neighbour's load moves both sides of a round alike.
    const reference = targets.find((t) => t.name === BASELINE)?.name ?? variants[0]?.name ?? ''
    const paired = targets.filter((t) => t.name !== reference && t.name !== FLOOR).map((t) => {
      const ratio = (f: (r: Measured) => number): number => {
        const mine = runs.filter((r) => r.name === t.name)
        const theirs = runs.filter((r) => r.name === reference)
        return Math.round(1000 * median(mine.map((r, i) => f(r) / f(theirs[i] ?? r)))) / 1000
      }
      return { name: t.name, reference, okRps: ratio((r) => r.okRps), probeP99: ratio((r) => r.probeP99) }
    })
    const report = {
      date: new Date().toISOString(),
      machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', node: process.version, loadAverageAtStart: loadAtStart, loadAverageAtEnd: loadavg() },
      params: { ...p, path: DEFAULT_PATH, pinned: pinned ? { servers: SERVER_CPUS, rest: REST_CPUS } : false, probeConnections: DEFAULT_PROBE_CONNECTIONS },
      rows,
      paired,
      runs,
      durationSeconds: Math.round((Date.now() - begun) / 1000)
    }
    const md = [
      '# Overload — wrk far over capacity, and a probe client meanwhile', '',
      `${report.date} · ${cpus().length} × ${cpus()[0]?.model ?? 'CPU'} · Node ${process.version} · load average at start ${loadAtStart.map((l) => l.toFixed(1)).join(' ')}, at end ${loadavg().map((l) => l.toFixed(1)).join(' ')} · ${report.durationSeconds} s`, '',
      `GET ${DEFAULT_PATH} on the in-process store (plans whose limits never bind). Load: wrk, 1 thread, ${p.connections} connections, closed loop, ${p.seconds} s per run. ` +
      `Probe: ${p.rate} requests/s at fixed times (open loop, at most ${DEFAULT_PROBE_CONNECTIONS} in flight), from ${DEFAULT_PROBE_MARGIN_S} s after wrk starts to ${DEFAULT_PROBE_MARGIN_S} s before it ends; its latency is send → last byte of whatever it was answered (200 or 503). ` +
      `${p.rounds} interleaved rounds; medians (max: the largest of all rounds). ` +
      (pinned ? `Pinned: gateway on CPU ${SERVER_CPUS}; backend, wrk and the probe on CPU ${REST_CPUS}.` : 'Not pinned.'), '',
      '| configuration | answers/s | 2xx/s | probe p50 ms | probe p99 ms | probe max ms | wrk p99 ms | non-2xx (all rounds) | socket errors | gateway CPU µs/answer |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
      ...rows.map((r) => `| ${r.name}${Object.keys(r.env).length === 0 ? '' : ` (${Object.entries(r.env).map(([k, v]) => `${k}=${v}`).join(' ')})`} | ${r.rps} | ${r.okRps} | ${r.probeP50} | ${r.probeP99} | ${r.probeMax} | ${r.wrkP99} | ${r.non2xx} | ${r.socketErrors} | ${r.processUs} |`),
      '',
      `Paired by round against "${reference}" (median of the per-round ratios):`, '',
      '| configuration | 2xx/s ÷ reference | probe p99 ÷ reference |', '|---|---:|---:|',
      ...paired.map((x) => `| ${x.name} | ${x.okRps} | ${x.probeP99} |`), '',
      'Per round — statuses the gateway counted (gateway_requests_total), what it shed (gateway_shed_requests_total by reason), the probe\'s statuses and p99, wrk\'s socket errors, and where the requests were (gateway_concurrency_limit, gateway_in_flight_requests, gateway_upstream_in_flight, gateway_upstream_queued):', '',
      ...runs.map((r) => `- round ${r.round + 1}, ${r.name}: statuses ${JSON.stringify(r.statuses)}; shed ${JSON.stringify(r.shed)}; probe ${JSON.stringify(r.probeStatuses)}, p99 ${r.probeP99.toFixed(1)} ms; wrk socket errors ${JSON.stringify(r.socketErrorsByKind ?? {})}, connections dropped at a full accept queue ${r.listenDrops}; load gauges (medians of 1 s readings) ${JSON.stringify(r.gauges)}; mean time in the gateway ${r.meanRequestMs.toFixed(1)} ms, of the backend (for those sent) ${r.meanUpstreamMs.toFixed(1)} ms`),
      ''
    ]
    writeResults('overload', md, report)
  } finally {
    await finishBench(setup)
  }
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) await main()
