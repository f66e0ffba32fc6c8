// `npm run bench:proxy`: what the proxy path costs per request, layer by layer, against the undici
// pool underneath it — the pool driven from node:http, the pool behind Fastify routes, stock
// @fastify/http-proxy, the gateway's own configuration of @fastify/http-proxy (bench/servers/
// lean-proxy.ts), and the whole gateway (in-process store). Each server runs in its own process on
// CPU 0 (the backend, wrk and this process on CPU 1); rounds interleave the configurations, order
// reversed every other round, and the figure to read is CPU per request from /proc (utime+stime ÷
// requests answered), steadier than req/s on a shared machine. Writes bench/results/proxy-cost.md
// and proxy-cost.json.
// PROXY_PROFILE=<configuration name> instead profiles that one configuration with --cpu-prof at
// steady state (only the samples taken during the measured load, after a warm-up, are kept) and
// writes bench/results/proxy-profile-<slug>.md (and, with PROXY_PROFILE_KEEP=1, the .cpuprofile).
// Env: BENCH_SECONDS [5] BENCH_ROUNDS [5] BENCH_CONNECTIONS [50] BENCH_WARMUP [3]
//      BENCH_BASELINE=<dir> also the proxy plugin and the gateway of another checkout (before/after:
//      `git archive` of the older commit with node_modules linked in)  BENCH_PIN [1]
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { cpus, loadavg } from 'node:os'
import { join } from 'node:path'
import { closedLoop, median } from './lib/load.js'
import { cpuMicros } from './lib/proc-cpu.js'
import { stop } from './lib/processes.js'
import { intFromEnv, log, RESULTS_DIR, round1, writeResults } from './lib/report.js'
import { assertServes, DEFAULT_PATH, finishBench, prepareBench, REST_CPUS, SERVER_CPUS, startGateway, startPrinting, type BenchSetup, type Target } from './lib/targets.js'
import { summarizeProfile, type CpuProfile } from './profile.js'

export const DEFAULT_SECONDS = 5
export const DEFAULT_ROUNDS = 5
export const DEFAULT_CONNECTIONS = 50
export const DEFAULT_WARMUP_SECONDS = 3
const TOKEN = 'bench-key-0'
/** Comparisons reported round by round (those whose two configurations ran). */
const PAIRS: Array<[string, string]> = [
  ['http-proxy, stock', 'undici pool, Fastify'],
  ['http-proxy, gateway configuration', 'undici pool, Fastify'],
  ['http-proxy, gateway configuration', 'http-proxy, stock'],
  ['http-proxy, gateway configuration', 'http-proxy, gateway configuration (baseline)'],
  ['gateway, in-process store', 'gateway, in-process store (baseline)']
]

const slug = (name: string): string => name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '')

interface Spec { name: string, start: (nodeArgs?: string[]) => Promise<Target> }

/** Monotonic µs on the clock V8's profiler stamps its samples with (CLOCK_MONOTONIC). */
const monotonicMicros = (): number => Number(process.hrtime.bigint() / 1000n)

/** The profile cut to the samples taken between `fromUs` and `toUs` (monotonic µs): the steady state only. */
export function window (profile: CpuProfile, fromUs: number, toUs: number): CpuProfile {
  const samples: number[] = []
  const timeDeltas: number[] = []
  let t = profile.startTime
  let kept = fromUs
  profile.samples.forEach((id, i) => {
    t += profile.timeDeltas[i] ?? 0
    if (t < fromUs || t > toUs) return
    samples.push(id)
    timeDeltas.push(t - kept)
    kept = t
  })
  return { ...profile, samples, timeDeltas, startTime: fromUs, endTime: toUs }
}

/** Frames' total time (self and callees), each sample counted once per frame however deep it recurses. */
export function inclusive (profile: CpuProfile, keep: (url: string) => boolean, top = 30): string[] {
  const parent = new Map<number, number>()
  for (const node of profile.nodes) for (const c of node.children ?? []) parent.set(c, node.id)
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const keyOf = (id: number): string | undefined => {
    const f = byId.get(id)?.callFrame
    if (f === undefined || !keep(f.url)) return undefined
    return `${f.functionName === '' ? '(anonymous)' : f.functionName} ${f.url.replace(/^.*node_modules\//, '').replace(/^.*\/(src|bench)\//, '$1/')}:${f.lineNumber + 1}`
  }
  const totals = new Map<string, number>()
  let busy = 0
  profile.samples.forEach((leaf, i) => {
    const us = profile.timeDeltas[i] ?? 0
    if (byId.get(leaf)?.callFrame.functionName === '(idle)') return
    busy += us
    const seen = new Set<string>()
    for (let id: number | undefined = leaf; id !== undefined; id = parent.get(id)) {
      const key = keyOf(id)
      if (key !== undefined && !seen.has(key)) { seen.add(key); totals.set(key, (totals.get(key) ?? 0) + us) }
    }
  })
  return ['| total time, % of busy | frame (self and callees) |', '|---:|---|',
    ...[...totals].sort((a, b) => b[1] - a[1]).slice(0, top).map(([k, us]) => `| ${(100 * us / busy).toFixed(1)} % | \`${k}\` |`)]
}

const PROXY_PACKAGES = ['@fastify/http-proxy/', '@fastify/reply-from/', '/fastify/lib/', 'undici/lib/', '/src/gateway/', '/bench/servers/']

async function main (): Promise<void> {
  const p = {
    seconds: intFromEnv('BENCH_SECONDS', DEFAULT_SECONDS),
    rounds: intFromEnv('BENCH_ROUNDS', DEFAULT_ROUNDS),
    connections: intFromEnv('BENCH_CONNECTIONS', DEFAULT_CONNECTIONS),
    warmup: intFromEnv('BENCH_WARMUP', DEFAULT_WARMUP_SECONDS)
  }
  const begun = Date.now()
  const loadAtStart = loadavg()
  let setup: BenchSetup | undefined
  try {
    setup = await prepareBench('proxy-cost', 1)
    const { pinned, serverCpus, backendUrl, configDir, work } = setup
    const baseline = process.env.BENCH_BASELINE
    const specs: Spec[] = [
      { name: 'undici pool, node:http', start: async (nodeArgs) => await startPrinting('undici pool, node:http', 'bench/servers/undici-pool.ts', [backendUrl, 'node'], { cpus: serverCpus, nodeArgs }) },
      { name: 'undici pool, Fastify', start: async (nodeArgs) => await startPrinting('undici pool, Fastify', 'bench/servers/undici-pool.ts', [backendUrl, 'fastify'], { cpus: serverCpus, nodeArgs }) },
      { name: 'http-proxy, stock', start: async (nodeArgs) => await startPrinting('http-proxy, stock', 'bench/servers/bare-proxy.ts', [backendUrl], { cpus: serverCpus, nodeArgs }) },
      { name: 'http-proxy, gateway configuration', start: async (nodeArgs) => await startPrinting('http-proxy, gateway configuration', 'bench/servers/lean-proxy.ts', [backendUrl], { cpus: serverCpus, nodeArgs }) },
      { name: 'gateway, in-process store', start: async (nodeArgs) => await startGateway('gateway, in-process store', { configDir, backendUrl, cpus: serverCpus, nodeArgs }) },
      ...(baseline === undefined || baseline === ''
        ? []
        : [
            { name: 'http-proxy, gateway configuration (baseline)', start: async (nodeArgs?: string[]) => await startPrinting('http-proxy, gateway configuration (baseline)', 'bench/servers/lean-proxy.ts', [backendUrl, baseline], { cpus: serverCpus, nodeArgs }) },
            { name: 'gateway, in-process store (baseline)', start: async (nodeArgs?: string[]) => await startGateway('gateway, in-process store (baseline)', { configDir, backendUrl, cpus: serverCpus, nodeArgs, root: baseline }) }
          ])
    ]

    const profiled = process.env.PROXY_PROFILE
    if (profiled !== undefined && profiled !== '') {
      const spec = specs.find((s) => s.name === profiled)
      if (spec === undefined) throw new Error(`PROXY_PROFILE: no configuration named "${profiled}"; one of: ${specs.map((s) => s.name).join(' | ')}`)
      const profDir = join(work, 'prof')
      const target = await spec.start(['--cpu-prof', `--cpu-prof-dir=${profDir}`])
      await assertServes(target, TOKEN)
      await closedLoop({ url: `${target.url}${DEFAULT_PATH}`, seconds: p.warmup, connections: p.connections, tokens: [TOKEN] })
      const cpuBefore = cpuMicros(target.pid)
      const from = monotonicMicros()
      const run = await closedLoop({ url: `${target.url}${DEFAULT_PATH}`, seconds: p.seconds, connections: p.connections, tokens: [TOKEN] })
      const to = monotonicMicros()
      const cpu = cpuMicros(target.pid) - cpuBefore
      if (target.child !== undefined) await stop(target.child)
      const file = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'))
      if (file === undefined) throw new Error('no profile written')
      const steady = window(JSON.parse(readFileSync(join(profDir, file), 'utf8')) as CpuProfile, from, to)
      const md = [`# CPU profile at steady state: ${spec.name}`, '',
        `${new Date().toISOString()} · ${p.seconds} s of wrk at ${p.connections} connections after ${p.warmup} s of warm-up; only the samples taken during those ${p.seconds} s are kept (no start-up, no warm-up): ` +
        `${Math.round(run.requestsPerSecond)} req/s under the profiler, ${(cpu / run.total).toFixed(1)} µs of process CPU per request (the profiler's own cost included).`, '',
        ...summarizeProfile(steady), '',
        'Where the time goes from the proxy\'s and undici\'s own functions (time in every function they call included):', '',
        ...inclusive(steady, (url) => PROXY_PACKAGES.some((pkg) => url.includes(pkg))), '']
      writeResults(`proxy-profile-${slug(spec.name)}`, md)
      // The profile itself (open it in Chrome DevTools or speedscope) only when asked: a megabyte per run.
      if (process.env.PROXY_PROFILE_KEEP === '1') writeFileSync(join(RESULTS_DIR, `proxy-profile-${slug(spec.name)}.cpuprofile`), JSON.stringify(steady))
      return
    }

    const targets: Target[] = []
    for (const s of specs) targets.push(await s.start())
    for (const t of targets) await assertServes(t, TOKEN)
    log(`proxy cost: ${p.rounds} rounds × ${p.seconds} s, ${p.connections} connections, GET ${DEFAULT_PATH}`)
    for (const t of targets) await closedLoop({ url: `${t.url}${DEFAULT_PATH}`, seconds: p.warmup, connections: p.connections, tokens: [TOKEN] })
    const runs = new Map<string, Array<{ rps: number, us: number, bad: number }>>(targets.map((t) => [t.name, []]))
    for (let round = 0; round < p.rounds; round++) {
      for (const t of round % 2 === 0 ? targets : [...targets].reverse()) {
        const before = cpuMicros(t.pid)
        const run = await closedLoop({ url: `${t.url}${DEFAULT_PATH}`, seconds: p.seconds, connections: p.connections, tokens: [TOKEN] })
        const us = (cpuMicros(t.pid) - before) / Math.max(1, run.total)
        runs.get(t.name)?.push({ rps: run.requestsPerSecond, us, bad: run.non2xx + run.errors })
        log(`  round ${round + 1}/${p.rounds}  ${t.name.padEnd(44)} ${run.requestsPerSecond.toFixed(0).padStart(6)} req/s  ${us.toFixed(1).padStart(6)} µs/req  non-2xx+errors ${run.non2xx + run.errors}`)
      }
    }
    for (const t of targets) if (t.child !== undefined) await stop(t.child)
    const floor = median(runs.get(specs[0]?.name ?? '')?.map((r) => r.us) ?? [])
    const rows = targets.map((t) => {
      const rs = runs.get(t.name) ?? []
      const us = median(rs.map((r) => r.us))
      const sorted = rs.map((r) => r.us).sort((a, b) => a - b)
      return {
        name: t.name,
        rps: Math.round(median(rs.map((r) => r.rps))),
        us: round1(us),
        overPool: round1(us - floor),
        min: round1(sorted[0] ?? NaN),
        max: round1(sorted[sorted.length - 1] ?? NaN),
        rounds: rs.map((r) => round1(r.us)),
        bad: rs.reduce((a, r) => a + r.bad, 0)
      }
    })
    // Round by round, each configuration against another measured minutes apart at most: the
    // machine's drift hits both sides of a ratio alike.
    const pairs = PAIRS.filter(([a, b]) => runs.has(a) && runs.has(b)).map(([a, b]) => {
      const ra = runs.get(a) ?? []
      const rb = runs.get(b) ?? []
      const ratios = ra.map((r, i) => r.us / (rb[i]?.us ?? NaN)).sort((x, y) => x - y)
      const diffs = ra.map((r, i) => r.us - (rb[i]?.us ?? NaN))
      return { a, b, ratio: Math.round(median(ratios) * 1000) / 1000, min: Math.round((ratios[0] ?? NaN) * 1000) / 1000, max: Math.round((ratios[ratios.length - 1] ?? NaN) * 1000) / 1000, diffUs: round1(median(diffs)) }
    })
    const report = {
      date: new Date().toISOString(),
      machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', node: process.version, loadAverageAtStart: loadAtStart, loadAverageAtEnd: loadavg() },
      params: { ...p, path: DEFAULT_PATH, pinned: pinned ? { servers: SERVER_CPUS, rest: REST_CPUS } : false },
      rows,
      pairs,
      durationSeconds: Math.round((Date.now() - begun) / 1000)
    }
    const md = [
      '# Proxy path — CPU per request, layer by layer', '',
      `${report.date} · ${cpus().length} × ${cpus()[0]?.model ?? 'CPU'} · Node ${process.version} · load average at start ${report.machine.loadAverageAtStart.map((l) => l.toFixed(1)).join(' ')}, at end ${loadavg().map((l) => l.toFixed(1)).join(' ')} · ${report.durationSeconds} s`, '',
      `GET ${DEFAULT_PATH}, wrk (1 thread) at ${p.connections} connections, ${p.rounds} interleaved rounds × ${p.seconds} s after ${p.warmup} s of warm-up each; ` +
      'CPU = utime+stime of the server process from /proc ÷ requests answered; median, min–max and every round. ' +
      (pinned ? `Pinned: servers on CPU ${SERVER_CPUS}; the backend, wrk and this process on CPU ${REST_CPUS}.` : 'Not pinned.'), '',
      '| configuration | req/s | CPU µs/req (median) | over the undici pool | min–max | rounds | non-2xx + errors |',
      '|---|---:|---:|---:|---:|---|---:|',
      ...rows.map((r) => `| ${r.name} | ${r.rps} | ${r.us} | ${r.overPool} | ${r.min}–${r.max} | ${r.rounds.join(' / ')} | ${r.bad} |`),
      '', 'Paired by round (A and B measured in the same round): median of the per-round CPU ratios A ÷ B, their min–max, and the median per-round difference.', '',
      '| A | B | A ÷ B | min–max | A − B, µs/req |', '|---|---|---:|---:|---:|',
      ...pairs.map((x) => `| ${x.a} | ${x.b} | ${x.ratio} | ${x.min}–${x.max} | ${x.diffUs} |`),
      ''
    ]
    writeResults('proxy-cost', md, report)
  } finally {
    await finishBench(setup)
  }
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) await main()
