// The tracing rows of `npm run bench`: what tracing costs the gateway (on Redis, info logs, metrics —
// what users run) in process CPU per request, closed loop (wrk when installed): the gateway's core
// busy, so per-second work (timers, log flushes, GC) is a small share of each request's CPU whatever
// the neighbours leave the load generator — at a constant rate that share swung with the rate a
// starved generator reached. Rows: tracing off (propagation only, the default),
// tracing on at 100 % and at 1 % (parentbased_traceidratio) exporting to a collector that accepts and
// drops (bench/servers/otlp-sink.ts), and — with BENCH_BASELINE — the same gateway of another checkout
// (today's, before tracing). Rounds interleave the rows, the order reversed every other round; per
// row the median of the rounds, and the noise: each row's spread over its rounds, and per-round
// ratios to the reference row (same round, so a neighbour's load hits both alike).
import type { ChildProcess } from 'node:child_process'
import { closedLoop, fixedRate, loaderName, median, type Run } from './load.js'
import { cpuMicros } from './proc-cpu.js'
import { firstLine, freePort, REPO_ROOT, startNode, stop } from './processes.js'
import { tracingHookCost, type HookCost } from './tracing-hooks.js'
import { join } from 'node:path'

export const DEFAULT_TRACING_ROUNDS = 6
/** Connections of a constant-rate run: enough that the rate never queues behind itself. */
const RATE_CONNECTIONS = 16
/** Per row before the rounds: a row measured half-warm reads as slower than its neighbours. */
export const DEFAULT_TRACING_WARMUP_SECONDS = 5
/** Targets of the tracing issue, as ratios of process CPU per request to the reference row. */
export const TARGET_OFF = 1.02
export const TARGET_ONE_PERCENT = 1.05

export interface TracingTarget { name: string, url: string, child: ChildProcess | undefined, pid: number | undefined, adminUrl: string }

export interface TracingCostOptions {
  /** Starts the gateway under test (on Redis) with this extra environment; `root`: another checkout's. */
  startGateway: (name: string, env: Record<string, string>, root?: string) => Promise<TracingTarget>
  baselineRoot: string | undefined
  token: string
  path: string
  seconds: number
  rounds: number
  connections: number
  /**
   * Requests per second for every row (BENCH_TRACING_RATE), at or below what the slowest row and the
   * load generator reach on this machine; unset: closed loop. In closed loop a row that slows the
   * machine's other core (the backend reading `traceparent`, the collector) batches less per event-loop
   * turn and pays more CPU per request for it; at one rate every row batches alike.
   */
  rate: number | undefined
  /** How the processes are pinned, for the text. */
  pinning: string
  log: (line: string) => void
}

interface RoundRun { processUs: number, requests: number, non2xx: number, errors: number, spansExported: number, spansDropped: number }

export interface TracingRow {
  name: string
  processUs: number
  processUsRounds: number[]
  /** (max − min) / median of the row's rounds. */
  spread: number
  /** Median and range of the per-round ratios to the reference row. */
  ratio: { median: number, min: number, max: number }
  spansPerRequest: number
  dropped: number
  non2xx: number
  errors: number
}

const round1 = (x: number): number => Math.round(x * 10) / 10
const round3 = (x: number): number => Math.round(x * 1000) / 1000
const fmt = (x: number, digits = 2): string => Number.isFinite(x) ? x.toFixed(digits) : 'n/a'

async function spanCounts (adminUrl: string): Promise<{ exported: number, dropped: number }> {
  try {
    const text = await (await fetch(`${adminUrl}/metrics`)).text()
    const value = (re: RegExp): number => [...text.matchAll(re)].reduce((a, m) => a + Number(m[1]), 0)
    return { exported: value(/^gateway_trace_spans_exported_total (\S+)$/gm), dropped: value(/^gateway_trace_spans_dropped_total\{[^}]*\} (\S+)$/gm) }
  } catch {
    // A baseline checkout from before tracing has no such metric.
    return { exported: NaN, dropped: NaN }
  }
}

export async function tracingCost (opts: TracingCostOptions): Promise<{ md: string[], report: Record<string, unknown>, checks: Array<{ target: string, value: number, ok: boolean }> }> {
  const sink = startNode([join(REPO_ROOT, 'bench', 'servers', 'otlp-sink.ts')], { stdout: 'pipe' })
  const { port } = JSON.parse(await firstLine(sink)) as { port: number }
  const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio' }
  const off = 'tracing off (propagation only)'
  const baseline = opts.baselineRoot === undefined ? undefined : `before tracing (baseline: ${opts.baselineRoot})`
  const targets: TracingTarget[] = [
    ...baseline === undefined || opts.baselineRoot === undefined ? [] : [await opts.startGateway(baseline, {}, opts.baselineRoot)],
    await opts.startGateway(off, {}),
    await opts.startGateway('tracing on, 1 % sampled', { ...endpoint, OTEL_TRACES_SAMPLER_ARG: '0.01' }),
    await opts.startGateway('tracing on, 100 % sampled', { ...endpoint, OTEL_TRACES_SAMPLER_ARG: '1' })
  ]
  const reference = baseline ?? off
  const url = (t: TracingTarget): string => `${t.url}${opts.path}`
  const rate = opts.rate
  const load = async (t: TracingTarget, seconds: number): Promise<Run> => rate === undefined
    ? await closedLoop({ url: url(t), seconds, connections: opts.connections, tokens: [opts.token] })
    : await fixedRate({ url: url(t), seconds, connections: RATE_CONNECTIONS, tokens: [opts.token], rate })
  const mode = rate === undefined ? `Closed loop, ${opts.connections} connections, ${loaderName()}` : `${rate} req/s constant for every row (autocannon, ${RATE_CONNECTIONS} connections)`
  const runs = new Map<string, RoundRun[]>(targets.map((t) => [t.name, []]))
  let hookCosts: HookCost[] = []
  try {
    opts.log(`tracing: ${mode}, ${opts.rounds} rounds × ${opts.seconds} s, rows ${targets.map((t) => t.name).join(' · ')}`)
    for (const t of targets) await load(t, DEFAULT_TRACING_WARMUP_SECONDS)
    for (let round = 0; round < opts.rounds; round++) {
      for (const t of round % 2 === 0 ? targets : [...targets].reverse()) {
        const spansBefore = await spanCounts(t.adminUrl)
        const cpuBefore = cpuMicros(t.pid)
        const run = await load(t, opts.seconds)
        const processUs = (cpuMicros(t.pid) - cpuBefore) / Math.max(1, run.total)
        const spansAfter = await spanCounts(t.adminUrl)
        const r = { processUs, requests: run.total, non2xx: run.non2xx, errors: run.errors, spansExported: spansAfter.exported - spansBefore.exported, spansDropped: spansAfter.dropped - spansBefore.dropped }
        runs.get(t.name)?.push(r)
        opts.log(`  round ${round + 1}/${opts.rounds}  ${t.name.padEnd(44)} ${fmt(processUs, 1)} µs/req  ${run.requestsPerSecond.toFixed(0)} req/s  spans exported ${r.spansExported} dropped ${r.spansDropped}  non-2xx ${run.non2xx}  errors ${run.errors}`)
      }
    }
    await Promise.all(targets.map(async (t) => { if (t.child !== undefined) await stop(t.child) }))
    opts.log('tracing: the hooks alone, in this process')
    hookCosts = await tracingHookCost(`http://127.0.0.1:${port}`)
  } finally {
    await Promise.all([sink, ...targets.map((t) => t.child)].map(async (child) => { if (child !== undefined) await stop(child) }))
  }

  const refRounds = (runs.get(reference) ?? []).map((r) => r.processUs)
  const rows: TracingRow[] = targets.map((t) => {
    const rs = runs.get(t.name) ?? []
    const us = rs.map((r) => r.processUs)
    const ratios = us.map((x, i) => x / (refRounds[i] ?? NaN))
    const requests = rs.reduce((a, r) => a + r.requests, 0)
    return {
      name: t.name,
      processUs: round1(median(us)),
      processUsRounds: us.map(round1),
      spread: round3((Math.max(...us) - Math.min(...us)) / median(us)),
      ratio: { median: round3(median(ratios)), min: round3(Math.min(...ratios)), max: round3(Math.max(...ratios)) },
      spansPerRequest: round3(rs.reduce((a, r) => a + r.spansExported, 0) / Math.max(1, requests)),
      dropped: rs.reduce((a, r) => a + r.spansDropped, 0),
      non2xx: rs.reduce((a, r) => a + r.non2xx, 0),
      errors: rs.reduce((a, r) => a + r.errors, 0)
    }
  })
  const row = (name: string): TracingRow | undefined => rows.find((r) => r.name === name)
  const onePercent = row('tracing on, 1 % sampled')?.ratio.median ?? NaN
  const offRatio = row(off)?.ratio.median ?? NaN
  const offUs = row(off)?.processUs ?? NaN
  const share = (name: string): number => round3((hookCosts.find((h) => h.name === name)?.nsPerRequest ?? NaN) / 1000 / offUs)
  const checks = [
    ...baseline === undefined ? [] : [{ target: `tracing off: process CPU per request ≤ ${TARGET_OFF} × before tracing (median of per-round ratios)`, value: offRatio, ok: offRatio <= TARGET_OFF }],
    { target: `tracing on at 1 %: process CPU per request ≤ ${TARGET_ONE_PERCENT} × ${baseline === undefined ? 'tracing off' : 'before tracing'} (median of per-round ratios)`, value: onePercent, ok: onePercent <= TARGET_ONE_PERCENT },
    { target: `the tracing work alone, off: ≤ ${round3(TARGET_OFF - 1)} of the off row's CPU per request`, value: share(off), ok: share(off) <= TARGET_OFF - 1 },
    { target: `the tracing work alone, on at 1 %: ≤ ${round3(TARGET_ONE_PERCENT - 1)} of the off row's CPU per request`, value: share('tracing on, 1 % sampled'), ok: share('tracing on, 1 % sampled') <= TARGET_ONE_PERCENT - 1 }
  ]
  const md = [
    `## Tracing cost (GET ${opts.path}, hot key, gateway on Redis)`, '',
    `${mode}; ${opts.rounds} interleaved rounds × ${opts.seconds} s; ` +
    'process CPU of the gateway per request (utime+stime from /proc), median of the rounds. Requests carry no `traceparent`, so the sampler decides at the edge. ' +
    `"Spread": (max − min) / median of the row's own rounds. "÷ ${reference}": per-round ratio to that row (median, and min–max over rounds) — the noise to read the targets against. ` +
    'Spans: exported per request and dropped, from the gateway\'s own counters; the collector accepts and drops (bench/servers/otlp-sink.ts).',
    opts.pinning, '',
    `| configuration | process µs/req | per round | spread | ÷ ${reference} (median) | min–max | spans exported/req | dropped | non-2xx | errors |`,
    '|---|---:|---|---:|---:|---|---:|---:|---:|---:|',
    ...rows.map((r) => `| ${r.name} | ${fmt(r.processUs, 1)} | ${r.processUsRounds.join(' / ')} | ${fmt(r.spread * 100, 1)} % | ${fmt(r.ratio.median, 3)} | ${fmt(r.ratio.min, 3)}–${fmt(r.ratio.max, 3)} | ${fmt(r.spansPerRequest, 3)} | ${Number.isFinite(r.dropped) ? r.dropped : 'n/a'} | ${r.non2xx} | ${r.errors} |`),
    '',
    '### The tracing work alone',
    '',
    'The gateway\'s tracing hooks and the undici channel messages of one proxied request, called in a loop on request-shaped objects in the bench ' +
    'process with the real SDK (export to the same collector included, flushed before the clock stops), minus the loop\'s own cost; median of ' +
    `interleaved rounds (bench/lib/tracing-hooks.ts). Steady where the rows above are not; it leaves out the trace id's bytes in the log line and the \`traceparent\` on the wire. "Share": of the off row's process CPU per request.`,
    '',
    '| configuration | ns per request | per round | share |',
    '|---|---:|---|---:|',
    ...hookCosts.map((h) => `| ${h.name} | ${h.nsPerRequest} | ${h.rounds.join(' / ')} | ${fmt(h.nsPerRequest / 10 / (row(off)?.processUs ?? NaN), 2)} % |`),
    ''
  ]
  return { md, report: { mode, connections: opts.connections, rounds: opts.rounds, seconds: opts.seconds, reference, rows, hooksAlone: hookCosts }, checks }
}

/** A free admin port for a gateway child, so its /metrics can be read. */
export async function adminPortEnv (): Promise<{ env: Record<string, string>, adminUrl: string }> {
  const port = await freePort()
  return { env: { ADMIN_PORT: String(port) }, adminUrl: `http://127.0.0.1:${port}` }
}
