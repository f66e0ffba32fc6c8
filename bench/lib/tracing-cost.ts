// The tracing rows of `npm run bench`: what tracing costs the gateway (on Redis, info logs, metrics —
// what users run) in process CPU per request, closed loop (wrk when installed). Rows: tracing on with
// every request unsampled (0 %), at 1 % and at 100 % (parentbased_traceidratio), exporting to a
// collector that accepts and drops (bench/servers/otlp-sink.ts), against tracing off (propagation
// only, the default) or — with BENCH_BASELINE — the gateway of another checkout.
// Each row runs beside a twin of the reference, both loaded at the same time on the same core (a load
// generator and a key each): on a shared machine whatever a neighbour does to that core in those
// seconds it does to both, and the pair's ratio of CPU per request cancels it. Both are started
// afresh for every round: two processes of one configuration read apart by 5–10 % for as long as
// they live (an A/A pair kept for a whole run read 1.05–1.24 in every round), so a pair kept across
// rounds measures its processes' luck, while new ones every round leave it to the median. CPU is
// read from the gateway itself and net of an idle rate (gateway-cpu.ts). The A/A control row — the
// reference beside its own twin — shows what is left of bias and noise. Rows are interleaved, the
// order reversed every other round; per row the median of its pair ratios, and their range.
import type { ChildProcess } from 'node:child_process'
import { closedLoop, fixedRate, loaderName, median, type Run } from './load.js'
import { MIN_IDLE_MS, NetCpu, readGateway } from './gateway-cpu.js'
import { firstLine, freePort, REPO_ROOT, startNode, stop } from './processes.js'
import { tracingHookCost, type HookCost } from './tracing-hooks.js'
import { join } from 'node:path'

export const DEFAULT_TRACING_ROUNDS = 8
/** Connections of a constant-rate run: enough that the rate never queues behind itself. */
const RATE_CONNECTIONS = 16
/** Per pair and round, before its window: a gateway measured half-warm reads as slower than its twin. */
export const DEFAULT_TRACING_WARMUP_SECONDS = 4
/** Targets of the tracing issue, as ratios of process CPU per request to the reference row. */
export const TARGET_OFF = 1.02
export const TARGET_ONE_PERCENT = 1.05
/** The row whose every request the sampler leaves out: what an unsampled request costs. */
const UNSAMPLED = 'tracing on, 0 % sampled (all unsampled)'
const ONE_PERCENT = 'tracing on, 1 % sampled'

export interface TracingTarget { name: string, url: string, child: ChildProcess | undefined, pid: number | undefined, adminUrl: string }

async function stopAll (children: Array<ChildProcess | undefined>): Promise<void> {
  await Promise.all(children.map(async (child) => { if (child !== undefined) await stop(child) }))
}

export interface TracingCostOptions {
  /** Starts the gateway under test (on Redis) with this extra environment; `root`: another checkout's. */
  startGateway: (name: string, env: Record<string, string>, root?: string) => Promise<TracingTarget>
  baselineRoot: string | undefined
  /** Keys are `<prefix><i>`: every gateway its own (a twin 2i, its row 2i + 1), each a hot consumer as if alone. */
  tokenPrefix: string
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

export async function tracingCost (opts: TracingCostOptions): Promise<{ md: string[], report: Record<string, unknown>, checks: Array<{ target: string, value: number, ok: boolean }> }> {
  const sink = startNode([join(REPO_ROOT, 'bench', 'servers', 'otlp-sink.ts')], { stdout: 'pipe' })
  const { port } = JSON.parse(await firstLine(sink)) as { port: number }
  const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio' }
  const off = 'tracing off (propagation only)'
  const baseline = opts.baselineRoot === undefined ? undefined : `before tracing (baseline: ${opts.baselineRoot})`
  const reference = baseline ?? off
  const control = `A/A control: ${reference} beside its twin`
  const specs: Array<{ name: string, env: Record<string, string>, root?: string | undefined }> = [
    { name: control, env: {}, root: opts.baselineRoot },
    ...baseline === undefined ? [] : [{ name: off, env: {} }],
    { name: UNSAMPLED, env: { ...endpoint, OTEL_TRACES_SAMPLER_ARG: '0' } },
    { name: ONE_PERCENT, env: { ...endpoint, OTEL_TRACES_SAMPLER_ARG: '0.01' } },
    { name: 'tracing on, 100 % sampled', env: { ...endpoint, OTEL_TRACES_SAMPLER_ARG: '1' } }
  ]
  const rate = opts.rate
  const load = async (t: TracingTarget, seconds: number, token: string): Promise<Run> => rate === undefined
    ? await closedLoop({ url: `${t.url}${opts.path}`, seconds, connections: opts.connections, tokens: [token] })
    : await fixedRate({ url: `${t.url}${opts.path}`, seconds, connections: RATE_CONNECTIONS, tokens: [token], rate })
  /** One window of `t`, net of the idle rate `idlePerMs` (its twin's, for a row: see gateway-cpu.ts). */
  const measure = async (t: TracingTarget, net: NetCpu, token: string, idlePerMs: number): Promise<RoundRun> => {
    const before = await readGateway(t.adminUrl, t.pid)
    const run = await load(t, opts.seconds, token)
    const after = await readGateway(t.adminUrl, t.pid)
    const processUs = net.end(before, after, idlePerMs) / Math.max(1, run.total)
    return { processUs, requests: run.total, non2xx: run.non2xx, errors: run.errors, spansExported: after.spansExported - before.spansExported, spansDropped: after.spansDropped - before.spansDropped }
  }
  /** A row and its twin, started for this round, warmed up, their idle rates read, then loaded together. */
  const pairRun = async (i: number, spec: (typeof specs)[number]): Promise<[RoundRun, RoundRun]> => {
    const started: TracingTarget[] = []
    try {
      started.push(await opts.startGateway(`${reference} (twin of row ${i + 1})`, {}, opts.baselineRoot))
      started.push(await opts.startGateway(spec.name, spec.env, spec.root))
      const [twin, row] = started as [TracingTarget, TracingTarget]
      const tokens = [`${opts.tokenPrefix}${2 * i}`, `${opts.tokenPrefix}${2 * i + 1}`] as const
      await Promise.all([load(twin, DEFAULT_TRACING_WARMUP_SECONDS, tokens[0]), load(row, DEFAULT_TRACING_WARMUP_SECONDS, tokens[1])])
      const nets = [new NetCpu(), new NetCpu()] as const
      for (const [k, g] of started.entries()) nets[k as 0 | 1].idleFrom(await readGateway(g.adminUrl, g.pid))
      await new Promise((resolve) => setTimeout(resolve, MIN_IDLE_MS))
      for (const [k, g] of started.entries()) nets[k as 0 | 1].begin(await readGateway(g.adminUrl, g.pid))
      return await Promise.all([measure(twin, nets[0], tokens[0], nets[0].idlePerMs), measure(row, nets[1], tokens[1], nets[0].idlePerMs)])
    } finally {
      await stopAll(started.map((g) => g.child))
    }
  }
  const mode = `${rate === undefined ? `Closed loop, ${opts.connections} connections, ${loaderName()}` : `${rate} req/s constant (autocannon, ${RATE_CONNECTIONS} connections)`} for each gateway of a pair`
  /** Per row: its runs, and its twin's runs of the same pairs. */
  const runs = new Map<string, { row: RoundRun[], twin: RoundRun[] }>(specs.map((p) => [p.name, { row: [], twin: [] }]))
  let hookCosts: HookCost[] = []
  try {
    opts.log(`tracing: ${mode}, ${opts.rounds} rounds × ${opts.seconds} s, each row beside a twin of ${reference}, both started afresh every round: ${specs.map((p) => p.name).join(' · ')}`)
    for (let round = 0; round < opts.rounds; round++) {
      const order = [...specs.entries()]
      for (const [i, spec] of round % 2 === 0 ? order : order.reverse()) {
        const [a, b] = await pairRun(i, spec)
        runs.get(spec.name)?.twin.push(a)
        runs.get(spec.name)?.row.push(b)
        opts.log(`  round ${round + 1}/${opts.rounds}  ${spec.name.padEnd(44)} ${fmt(b.processUs, 1)} µs/req (${b.requests} requests, spans exported ${b.spansExported} dropped ${b.spansDropped}, non-2xx ${b.non2xx}, errors ${b.errors})  ÷ ${fmt(b.processUs / a.processUs, 3)} (twin ${fmt(a.processUs, 1)} µs/req, ${a.requests} requests)`)
      }
    }
    opts.log('tracing: the hooks alone, in this process')
    hookCosts = await tracingHookCost(`http://127.0.0.1:${port}`)
  } finally {
    await stop(sink)
  }

  const summarize = (name: string, rs: RoundRun[], ratios: number[]): TracingRow => {
    const us = rs.map((r) => r.processUs)
    const requests = rs.reduce((a, r) => a + r.requests, 0)
    return {
      name,
      processUs: round1(median(us)),
      processUsRounds: us.map(round1),
      spread: round3((Math.max(...us) - Math.min(...us)) / median(us)),
      ratio: { median: round3(median(ratios)), min: round3(Math.min(...ratios)), max: round3(Math.max(...ratios)) },
      spansPerRequest: round3(rs.reduce((a, r) => a + r.spansExported, 0) / Math.max(1, requests)),
      dropped: rs.reduce((a, r) => a + r.spansDropped, 0),
      non2xx: rs.reduce((a, r) => a + r.non2xx, 0),
      errors: rs.reduce((a, r) => a + r.errors, 0)
    }
  }
  const twins = [...runs.values()].flatMap((r) => r.twin)
  const rows: TracingRow[] = [
    summarize(`${reference} (the twins)`, twins, twins.map(() => 1)),
    ...specs.map((p) => {
      const r = runs.get(p.name) ?? { row: [], twin: [] }
      return summarize(p.name, r.row, r.row.map((x, i) => x.processUs / (r.twin[i]?.processUs ?? NaN)))
    })
  ]
  const row = (name: string): TracingRow | undefined => rows.find((r) => r.name === name)
  const ratioOf = (name: string): number => row(name)?.ratio.median ?? NaN
  const refUs = rows[0]?.processUs ?? NaN
  const share = (name: string): number => round3((hookCosts.find((h) => h.name === name)?.nsPerRequest ?? NaN) / 1000 / refUs)
  const against = baseline === undefined ? 'tracing off' : 'before tracing'
  const checks = [
    ...baseline === undefined ? [] : [{ target: `tracing off: process CPU per request ≤ ${TARGET_OFF} × before tracing (median of per-pair ratios)`, value: ratioOf(off), ok: ratioOf(off) <= TARGET_OFF }],
    { target: `tracing on, every request unsampled: process CPU per request ≤ ${TARGET_OFF} × ${against} (median of per-pair ratios)`, value: ratioOf(UNSAMPLED), ok: ratioOf(UNSAMPLED) <= TARGET_OFF },
    { target: `tracing on at 1 %: process CPU per request ≤ ${TARGET_ONE_PERCENT} × ${against} (median of per-pair ratios)`, value: ratioOf(ONE_PERCENT), ok: ratioOf(ONE_PERCENT) <= TARGET_ONE_PERCENT },
    { target: `the tracing work alone, off: ≤ ${round3(TARGET_OFF - 1)} of the reference's CPU per request`, value: share(off), ok: share(off) <= TARGET_OFF - 1 },
    { target: `the tracing work alone, every request unsampled: ≤ ${round3(TARGET_OFF - 1)} of the reference's CPU per request`, value: share(UNSAMPLED), ok: share(UNSAMPLED) <= TARGET_OFF - 1 },
    { target: `the tracing work alone, on at 1 %: ≤ ${round3(TARGET_ONE_PERCENT - 1)} of the reference's CPU per request`, value: share(ONE_PERCENT), ok: share(ONE_PERCENT) <= TARGET_ONE_PERCENT - 1 }
  ]
  const md = [
    `## Tracing cost (GET ${opts.path}, hot key, gateway on Redis)`, '',
    `${mode}; ${opts.rounds} interleaved rounds × ${opts.seconds} s. Every row runs beside a twin: a gateway of the reference configuration (${reference}), ` +
    `loaded at the same time by its own load generator with its own key, both on one core — whatever a neighbour does to that core in those seconds it does to both. Both are started afresh for every round and warmed up ${DEFAULT_TRACING_WARMUP_SECONDS} s: two processes of one configuration can read 5–10 % apart for as long as they live. ` +
    'Process CPU of the gateway per request, net of its idle rate (from its own /metrics, to the µs: bench/lib/gateway-cpu.ts), median of its runs (the first line: of every twin\'s). Requests carry no `traceparent`, so the sampler decides at the edge. ' +
    `"Spread": (max − min) / median of the row's own runs. "÷ twin": the row's CPU per request over its twin's in the same pair (median, and min–max over rounds). The A/A control is the reference beside its own twin: how far apart two identical gateways read, the bias and noise to read the targets against. ` +
    'Spans: exported per request and dropped, from the gateway\'s own counters; the collector accepts and drops (bench/servers/otlp-sink.ts).',
    opts.pinning, '',
    `| configuration | process µs/req | per round | spread | ÷ twin (median) | min–max | spans exported/req | dropped | non-2xx | errors |`,
    '|---|---:|---|---:|---:|---|---:|---:|---:|---:|',
    ...rows.map((r) => `| ${r.name} | ${fmt(r.processUs, 1)} | ${r.processUsRounds.join(' / ')} | ${fmt(r.spread * 100, 1)} % | ${fmt(r.ratio.median, 3)} | ${fmt(r.ratio.min, 3)}–${fmt(r.ratio.max, 3)} | ${fmt(r.spansPerRequest, 3)} | ${Number.isFinite(r.dropped) ? r.dropped : 'n/a'} | ${r.non2xx} | ${r.errors} |`),
    '',
    '### The tracing work alone',
    '',
    'The gateway\'s tracing hooks and the undici channel messages of one proxied request, called in a loop on request-shaped objects in the bench ' +
    'process with the real SDK (export to the same collector included, flushed before the clock stops), minus the loop\'s own cost; median of ' +
    `interleaved rounds (bench/lib/tracing-hooks.ts). Steady where the rows above are not; it leaves out the trace id's bytes in the log line and the \`traceparent\` on the wire. "Share": of the reference's process CPU per request (the twins' median).`,
    '',
    '| configuration | ns per request | per round | share |',
    '|---|---:|---|---:|',
    ...hookCosts.map((h) => `| ${h.name} | ${h.nsPerRequest} | ${h.rounds.join(' / ')} | ${fmt(h.nsPerRequest / 10 / refUs, 2)} % |`),
    ''
  ]
  return { md, report: { mode, connections: opts.connections, rounds: opts.rounds, seconds: opts.seconds, reference, rows, hooksAlone: hookCosts }, checks }
}

/** A free admin port for a gateway child, so its /metrics can be read. */
export async function adminPortEnv (): Promise<{ env: Record<string, string>, adminUrl: string }> {
  const port = await freePort()
  return { env: { ADMIN_PORT: String(port) }, adminUrl: `http://127.0.0.1:${port}` }
}
