// `npm run bench:profile`: where the gateway's CPU goes under load, at steady state. Runs the real
// entry point (src/gateway/server.ts, Redis store, info logs, metrics) under `node --cpu-prof` behind
// the same backend and Redis as `npm run bench`, warms it up, loads it for BENCH_SECONDS, stops it
// (the profile is written at exit) and summarizes the top self-time frames and the self time per
// package of the measured run alone (start-up and warm-up cut out of the profile). Writes
// bench/results/<name>.cpuprofile (open it in Chrome DevTools or speedscope) and <name>-profile.md.
// Env: BENCH_SECONDS [10] BENCH_CONNECTIONS [32] PROFILE_WARMUP_SECONDS [5]
// PROFILE_TARGET=redis (default) | memory (in-process store) | bare (bench/servers/bare-proxy.ts, to compare)
// PROFILE_WORKLOAD=hot (default) | keys | zipf: the bench's workloads (bench/lib/workloads.ts).
// PROFILE_GATEWAY_ENV='NAME=value,NAME=value': more environment for the gateway (tracing on, say);
// PROFILE_NAME: the results' file name instead of gateway-<target>-<workload>.
// PROFILE_ROOT: another checkout (with node_modules) whose gateway to profile, e.g. the code before a change.
// PROFILE_HEAP=1: also V8's sampling heap profiler, garbage included (bench/lib/heap-sampling.ts), over the
// measured run: the top allocating frames in bytes per request join the summary (<name>.heapprofile beside it).
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { writeConfigWithKeys } from './config-load.js'
import { compareAllocations, summarizeAllocations, type AllocationProfile } from './lib/heap-sampling.js'
import { parseEnvList } from './lib/env-list.js'
import { throughput } from './lib/load.js'
import { firstLine, freePort, REPO_ROOT, startBackend, startNode, startRedis, stop, stopAll, unboundPlans, waitForHttp } from './lib/processes.js'
import { buildWorkloads, CONFIG_KEYS, selectWorkloads } from './lib/workloads.js'

export const DEFAULT_PROFILE_SECONDS = 10
export const DEFAULT_PROFILE_WARMUP_SECONDS = 5
export const DEFAULT_TOP_FRAMES = 25
const RESULTS_DIR = join(REPO_ROOT, 'bench', 'results')

interface ProfileNode { id: number, callFrame: { functionName: string, url: string, lineNumber: number }, hitCount?: number, children?: number[] }
export interface CpuProfile { nodes: ProfileNode[], samples: number[], timeDeltas: number[], startTime: number, endTime: number }

/** Which package (or our module, or Node internals) a frame belongs to. */
function owner (url: string): string {
  if (url === '') return '(native / gc / idle)'
  const nm = url.lastIndexOf('node_modules/')
  if (nm >= 0) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/')
    return rest[0]?.startsWith('@') === true ? `${rest[0]}/${rest[1] ?? ''}` : rest[0] ?? url
  }
  if (url.startsWith('node:')) return 'node core'
  const src = url.indexOf('/src/')
  return src >= 0 ? url.slice(src + 1) : url
}

/** The samples of the `lengthUs` ending `beforeEndUs` before the profile's end (the measured run alone). */
export function profileWindow (profile: CpuProfile, beforeEndUs: number, lengthUs: number): CpuProfile {
  const to = profile.endTime - beforeEndUs
  const from = to - lengthUs
  const samples: number[] = []
  const timeDeltas: number[] = []
  let t = profile.startTime
  profile.samples.forEach((id, i) => {
    t += profile.timeDeltas[i] ?? 0
    if (t < from || t > to) return
    samples.push(id)
    timeDeltas.push(profile.timeDeltas[i] ?? 0)
  })
  return { ...profile, samples, timeDeltas, startTime: from, endTime: to }
}

/** µs the profiled thread was not idle. */
export function busyMicros (profile: CpuProfile): number {
  const idle = new Set(profile.nodes.filter((n) => n.callFrame.functionName === '(idle)').map((n) => n.id))
  return profile.samples.reduce((sum, id, i) => sum + (idle.has(id) ? 0 : profile.timeDeltas[i] ?? 0), 0)
}

/** Packages whose work is the policy layer (the bare proxy has none of it). */
const POLICY_OWNERS = ['pino', 'sonic-boom', 'prom-client', 'lru-cache', 'fast-redact', 'fast-safe-stringify', 'safe-stable-stringify']

/**
 * Self time of the policy layer per frame group, in % of busy (not idle) time: our modules
 * (src/gateway/** Self time per profile node id, in µs (the samples' time deltas summed by the node they hit). */
function selfMicros (profile: CpuProfile): Map<number, number> {
  const selfUs = new Map<number, number>()
  profile.samples.forEach((id, index) => { selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[index] ?? 0)) })
  return selfUs
}

/**) and the packages only the gateway uses (logging, metrics, caches), plus Fastify's
 * per-request child logger. The gateway's share of the proxy path itself is the rest.
 */
export function policyShares (profile: CpuProfile): Map<string, number> {
  const selfUs = selfMicros(profile)
  const busy = busyMicros(profile)
  const shares = new Map<string, number>()
  for (const node of profile.nodes) {
    const us = selfUs.get(node.id) ?? 0
    if (us === 0) continue
    const o = owner(node.callFrame.url)
    const group = o.startsWith('src/gateway/') || POLICY_OWNERS.includes(o)
      ? o
      : node.callFrame.url.includes('fastify/lib/logger-factory') ? 'fastify/lib/logger-factory (per-request child logger)' : undefined
    if (group !== undefined) shares.set(group, (shares.get(group) ?? 0) + 100 * us / busy)
  }
  return shares
}

/** A before/after table of policyShares (markdown lines). */
export function comparePolicyShares (before: CpuProfile, after: CpuProfile): string[] {
  const b = policyShares(before)
  const a = policyShares(after)
  const names = [...new Set([...b.keys(), ...a.keys()])].sort((x, y) => (b.get(y) ?? 0) - (b.get(x) ?? 0))
  const lines = ['| self time, % of busy | before | after |', '|---|---:|---:|']
  for (const n of names) lines.push(`| ${n} | ${(b.get(n) ?? 0).toFixed(2)} | ${(a.get(n) ?? 0).toFixed(2)} |`)
  const total = (m: Map<string, number>): number => [...m.values()].reduce((x, y) => x + y, 0)
  lines.push(`| **policy layer in total** | **${total(b).toFixed(2)}** | **${total(a).toFixed(2)}** |`)
  return lines
}

/** Self time per frame (function, file, line) in % of busy time. */
export function frameShares (profile: CpuProfile): Map<string, number> {
  const selfUs = selfMicros(profile)
  const busy = busyMicros(profile)
  const shares = new Map<string, number>()
  for (const node of profile.nodes) {
    const us = selfUs.get(node.id) ?? 0
    const f = node.callFrame
    if (us === 0 || f.functionName === '(idle)') continue
    const file = f.url.replace(/^.*node_modules\//, '').replace(/^.*\/src\//, 'src/').replace(/^file:\/\//, '')
    const key = `${f.functionName === '' ? '(anonymous)' : f.functionName} ${file === '' ? '' : `${file}:${f.lineNumber + 1}`}`.trim()
    shares.set(key, (shares.get(key) ?? 0) + 100 * us / busy)
  }
  return shares
}

/** The frames whose share grew most from `base` to `other` (markdown lines): what `other`'s workload adds. */
export function frameDiff (base: CpuProfile, other: CpuProfile, top = 25): string[] {
  const a = frameShares(base)
  const b = frameShares(other)
  const rows = [...new Set([...a.keys(), ...b.keys()])].map((k) => [k, a.get(k) ?? 0, b.get(k) ?? 0] as const).sort((x, y) => (y[2] - y[1]) - (x[2] - x[1]))
  return ['| Δ % of busy | base | other | frame |', '|---:|---:|---:|---|', ...rows.slice(0, top).map(([k, x, y]) => `| ${(y - x).toFixed(2)} | ${x.toFixed(2)} | ${y.toFixed(2)} | \`${k}\` |`)]
}

/** The policy layer's stages, for what one more distinct consumer costs (docs/performance.md). */
export const STAGES = ['auth', 'limiter state', 'history', 'headers', 'metrics', 'logs', 'garbage collector'] as const
export type Stage = typeof STAGES[number]

/** The stage a frame's self time is charged to, or undefined (the proxy path, Fastify, Node). */
export function stageOf (functionName: string, url: string): Stage | undefined {
  if (functionName === '(garbage collector)') return 'garbage collector'
  const o = owner(url)
  if (o.startsWith('src/gateway/auth/') || (url === 'node:internal/crypto/hash' || functionName === 'Hash' || functionName === 'digest')) return 'auth'
  if (o.startsWith('src/gateway/limiter/headers') || o.startsWith('src/gateway/proxy/request-headers') || o.startsWith('src/gateway/lifecycle/')) return 'headers'
  if (o.startsWith('src/gateway/limiter/') || o === 'lru-cache') return 'limiter state'
  if (o.startsWith('src/gateway/history/')) return 'history'
  if (o.startsWith('src/gateway/observability/metrics/') || o === 'prom-client') return 'metrics'
  if (o.startsWith('src/gateway/observability/') || ['pino', 'sonic-boom', 'fast-redact', 'safe-stable-stringify'].includes(o) || url.includes('fastify/lib/logger-factory')) return 'logs'
  return undefined
}

/** Self time per stage in % of busy time (lru-cache is charged to the limiter: the key cache's share is small beside the store's). */
export function stageShares (profile: CpuProfile): Map<Stage, number> {
  const selfUs = selfMicros(profile)
  const busy = busyMicros(profile)
  const shares = new Map<Stage, number>(STAGES.map((s) => [s, 0]))
  for (const node of profile.nodes) {
    const us = selfUs.get(node.id) ?? 0
    const stage = us === 0 ? undefined : stageOf(node.callFrame.functionName, node.callFrame.url)
    if (stage !== undefined) shares.set(stage, (shares.get(stage) ?? 0) + 100 * us / busy)
  }
  return shares
}

/**
 * Our frames (src/): self time per function and file, in % of busy time and in µs per request given `requests`; and the
 * time under tsx's `__name` (keepNames: each closure is named by Object.defineProperty as it is made), by the nearest
 * of our callers — a closure made per request shows there. Markdown lines.
 */
export function ourFrames (profile: CpuProfile, requests: number, top = DEFAULT_TOP_FRAMES): string[] {
  const selfUs = selfMicros(profile)
  const busy = busyMicros(profile)
  const byNode = new Map(profile.nodes.map((n) => [n.id, n]))
  const parent = new Map<number, number>()
  for (const node of profile.nodes) for (const c of node.children ?? []) parent.set(c, node.id)
  const label = (f: ProfileNode['callFrame']): string => `${f.functionName === '' ? '(anonymous)' : f.functionName} ${f.url.replace(/^.*\/src\//, 'src/')}`
  const ours = new Map<string, number>()
  const naming = new Map<string, number>()
  for (const [id, us] of selfUs) {
    const frame = byNode.get(id)?.callFrame
    if (frame === undefined) continue
    if (frame.url.includes('/src/')) ours.set(label(frame), (ours.get(label(frame)) ?? 0) + us)
    let underName = false
    let caller: string | undefined
    for (let at: number | undefined = id; at !== undefined && caller === undefined; at = parent.get(at)) {
      const f = byNode.get(at)?.callFrame
      if (f === undefined) break
      if (f.functionName === '__name') underName = true
      else if (underName && f.url.includes('/src/')) caller = label(f)
    }
    if (underName) naming.set(caller ?? '(no caller of ours)', (naming.get(caller ?? '(no caller of ours)') ?? 0) + us)
  }
  const row = (us: number): string => `${(100 * us / busy).toFixed(2)} | ${(us / requests).toFixed(2)}`
  const total = [...ours.values()].reduce((a, b) => a + b, 0)
  const lines = [`Busy ${(busy / 1e6).toFixed(2)} s for ${requests} requests: ${(busy / requests).toFixed(1)} µs per request; our frames' self time ${row(total).replace(' | ', ' % of busy, ')} µs per request.`, '',
    '| % of busy | µs/request | our frame (self time) |', '|---:|---:|---|']
  for (const [k, us] of [...ours].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`| ${row(us)} | \`${k}\` |`)
  lines.push('', '| % of busy | µs/request | under tsx\'s `__name`, by our nearest caller |', '|---:|---:|---|')
  for (const [k, us] of [...naming].sort((a, b) => b[1] - a[1])) lines.push(`| ${row(us)} | \`${k}\` |`)
  return lines
}

export function summarizeProfile (profile: CpuProfile, top = DEFAULT_TOP_FRAMES): string[] {
  const selfUs = selfMicros(profile)
  const total = [...selfUs.values()].reduce((a, b) => a + b, 0)
  const byFrame = new Map<string, number>()
  const byOwner = new Map<string, number>()
  for (const node of profile.nodes) {
    const us = selfUs.get(node.id) ?? 0
    if (us === 0) continue
    const f = node.callFrame
    const file = f.url.replace(/^.*node_modules\//, '').replace(/^.*\/src\//, 'src/').replace(/^file:\/\//, '')
    const key = `${f.functionName === '' ? '(anonymous)' : f.functionName} ${file === '' ? '' : `${file}:${f.lineNumber + 1}`}`
    byFrame.set(key, (byFrame.get(key) ?? 0) + us)
    const o = owner(f.url)
    byOwner.set(o, (byOwner.get(o) ?? 0) + us)
  }
  const pct = (us: number): string => `${(100 * us / total).toFixed(1)} %`
  const lines = ['| self time | frame |', '|---:|---|']
  for (const [k, us] of [...byFrame].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`| ${pct(us)} | \`${k.trim()}\` |`)
  // Native frames (socket writes, mostly) have no file: charge them to the nearest caller in a package or in src/.
  const parent = new Map<number, number>()
  for (const node of profile.nodes) for (const c of node.children ?? []) parent.set(c, node.id)
  const byNode = new Map(profile.nodes.map((n) => [n.id, n]))
  const nativeBy = new Map<string, number>()
  for (const node of profile.nodes) {
    const us = selfUs.get(node.id) ?? 0
    if (us === 0 || node.callFrame.url !== '' || node.callFrame.functionName.startsWith('(')) continue
    let id = parent.get(node.id)
    let caller: string | undefined
    let nearest: string | undefined
    while (id !== undefined && caller === undefined) {
      const f = byNode.get(id)?.callFrame
      const name = f === undefined ? '' : `${f.functionName === '' ? '(anonymous)' : f.functionName} ${f.url.replace(/^.*node_modules\//, '').replace(/^.*\/src\//, 'src/')}:${f.lineNumber + 1}`
      if (f !== undefined && (f.url.includes('node_modules/') || f.url.includes('/src/'))) caller = name
      else if (nearest === undefined && f !== undefined && f.url !== '') nearest = name
      id = parent.get(id)
    }
    caller ??= nearest === undefined ? '(no JS caller)' : `${nearest} (node core only)`
    const key = `${node.callFrame.functionName} ← ${caller}`
    nativeBy.set(key, (nativeBy.get(key) ?? 0) + us)
  }
  lines.push('', '| self time | native frame ← nearest caller in a package or src/ |', '|---:|---|')
  for (const [k, us] of [...nativeBy].sort((a, b) => b[1] - a[1]).slice(0, 10)) lines.push(`| ${pct(us)} | \`${k}\` |`)
  lines.push('', '| self time | package / module |', '|---:|---|')
  for (const [k, us] of [...byOwner].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`| ${pct(us)} | ${k} |`)
  return lines
}

async function main (): Promise<void> {
  const seconds = Number(process.env.BENCH_SECONDS ?? DEFAULT_PROFILE_SECONDS)
  const connections = Number(process.env.BENCH_CONNECTIONS ?? 32)
  const target = process.env.PROFILE_TARGET ?? 'redis'
  const useRedis = target === 'redis'
  const work = mkdtempSync(join(tmpdir(), 'petstore-profile-'))
  try {
    const redis = await startRedis(work)
    const { url: backendUrl } = await startBackend(work)
    const configDir = join(work, 'config')
    mkdirSync(configDir)
    const workloadId = process.env.PROFILE_WORKLOAD ?? 'hot'
    const workload = buildWorkloads(selectWorkloads(workloadId))[0]!
    writeConfigWithKeys(CONFIG_KEYS, configDir)
    unboundPlans(configDir)
    const { tokens, order } = workload
    const warmupSeconds = Number(process.env.PROFILE_WARMUP_SECONDS ?? DEFAULT_PROFILE_WARMUP_SECONDS)
    const profDir = join(work, 'prof')
    const port = await freePort()
    const heapFile = process.env.PROFILE_HEAP === '1' ? join(work, 'allocations.heapprofile') : undefined
    const nodeArgs = ['--cpu-prof', `--cpu-prof-dir=${profDir}`, ...(heapFile === undefined ? [] : ['--import', join(REPO_ROOT, 'bench', 'lib', 'heap-sampling.ts')])]
    const heapEnv: Record<string, string> = heapFile === undefined ? {} : { HEAP_SAMPLING_FILE: heapFile, HEAP_SAMPLING_ON: 'SIGUSR2' }
    let gateway
    let url
    if (target === 'bare') {
      gateway = startNode([join(REPO_ROOT, 'bench', 'servers', 'bare-proxy.ts'), backendUrl], { nodeArgs, stdout: 'pipe', env: heapEnv })
      url = `http://127.0.0.1:${(JSON.parse(await firstLine(gateway)) as { port: number }).port}/v1/pets?limit=10`
    } else {
      gateway = startNode([join(process.env.PROFILE_ROOT ?? REPO_ROOT, 'src', 'gateway', 'server.ts')], {
        nodeArgs,
        env: {
          GATEWAY_HOST: '127.0.0.1', GATEWAY_PORT: String(port), ADMIN_PORT: String(await freePort()),
          BACKEND_URL: backendUrl, CONFIG_DIR: configDir, CONFIG_WATCH: 'false', LOG_LEVEL: 'info',
          REDIS_URL: useRedis ? redis.url : '', GATEWAY_WORKERS: '1', ...heapEnv,
          ...parseEnvList(process.env.PROFILE_GATEWAY_ENV)
        }
      })
      url = `http://127.0.0.1:${port}/v1/pets?limit=10`
    }
    await waitForHttp(url)
    await throughput({ url, seconds: warmupSeconds, connections, tokens, order })
    if (heapFile !== undefined) gateway.kill('SIGUSR2') // the sampling heap profiler starts now
    const run = await throughput({ url, seconds, connections, tokens, order })
    const ranUntil = performance.now()
    await stop(gateway)
    const stoppedAfterUs = (performance.now() - ranUntil) * 1000
    const file = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'))
    if (file === undefined) throw new Error('no profile written')
    const whole = JSON.parse(readFileSync(join(profDir, file), 'utf8')) as CpuProfile
    const profile = profileWindow(whole, stoppedAfterUs, seconds * 1e6)
    mkdirSync(RESULTS_DIR, { recursive: true })
    const name = process.env.PROFILE_NAME ?? `${target === 'bare' ? 'bare-proxy' : `gateway-${target}`}-${workload.id}`
    writeFileSync(join(RESULTS_DIR, `${name}.cpuprofile`), JSON.stringify(profile))
    const busyUs = busyMicros(profile)
    const md = [`# CPU profile: ${target === 'bare' ? 'bare @fastify/http-proxy' : `gateway (${useRedis ? 'Redis' : 'in-process store'}, info logs, metrics)`}`, '',
      `Workload: ${workload.title}. ${seconds} s at ${connections} connections after ${warmupSeconds} s of warm-up; the profile is the measured run alone (start-up and warm-up cut out): ${Math.round(run.requestsPerSecond)} req/s. File: bench/results/${name}.cpuprofile.`,
      `CPU busy (not idle) in the run ÷ requests answered: ${(busyUs / run.total).toFixed(1)} µs per request.`, '',
      ...summarizeProfile(profile), '',
      '| policy layer: self time, % of busy | |', '|---|---:|',
      ...[...policyShares(profile)].sort((x, y) => y[1] - x[1]).map(([k, v]) => `| ${k} | ${v.toFixed(2)} |`), '']
    if (heapFile !== undefined) {
      const allocations = readFileSync(heapFile, 'utf8')
      writeFileSync(join(RESULTS_DIR, `${name}.heapprofile`), allocations)
      md.push('## Allocations', '', ...summarizeAllocations(JSON.parse(allocations) as AllocationProfile, run.total), '')
    }
    writeFileSync(join(RESULTS_DIR, `${name}-profile.md`), md.join('\n'))
    process.stdout.write(md.join('\n') + '\n')
  } finally {
    await stopAll()
    rmSync(work, { recursive: true, force: true })
  }
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  //   node --import ./src/ts-resolve.ts bench/profile.ts compare <before.cpuprofile> <after.cpuprofile>   prints the policy layer's shares
  //   node --import ./src/ts-resolve.ts bench/profile.ts stages <seconds> <a.cpuprofile> <b.cpuprofile> …   each stage's share of busy time in the last <seconds> of each profile
  if (process.argv[2] === 'stages') {
    const seconds = Number(process.argv[3])
    const files = process.argv.slice(4)
    const shares = files.map((f) => { const p = JSON.parse(readFileSync(f, 'utf8')) as CpuProfile; return stageShares(profileWindow(p, 0, seconds * 1e6)) })
    const lines = [`| stage: self time, % of busy | ${files.map((f) => f.replace(/^.*\//, '')).join(' | ')} |`, `|---|${files.map(() => '---:').join('|')}|`]
    for (const stage of STAGES) lines.push(`| ${stage} | ${shares.map((m) => (m.get(stage) ?? 0).toFixed(2)).join(' | ')} |`)
    process.stdout.write(lines.join('\n') + '\n')
  } else if (process.argv[2] === 'diff') {
    //   node --import ./src/ts-resolve.ts bench/profile.ts diff <seconds> <base.cpuprofile> <other.cpuprofile>   frames whose share grew most (last <seconds> of each)
    const read = (file: string | undefined): CpuProfile => profileWindow(JSON.parse(readFileSync(file ?? '', 'utf8')) as CpuProfile, 0, Number(process.argv[3]) * 1e6)
    process.stdout.write(frameDiff(read(process.argv[4]), read(process.argv[5])).join('\n') + '\n')
  } else if (process.argv[2] === 'top') {
    //   node --import ./src/ts-resolve.ts bench/profile.ts top <seconds> <file.cpuprofile>   top self-time frames of its last <seconds>
    const p = JSON.parse(readFileSync(process.argv[4] ?? '', 'utf8')) as CpuProfile
    process.stdout.write(summarizeProfile(profileWindow(p, 0, Number(process.argv[3]) * 1e6), 30).join('\n') + '\n')
  } else if (process.argv[2] === 'ours') {
    //   node --import ./src/ts-resolve.ts bench/profile.ts ours <seconds> <requests> <file.cpuprofile>   our frames of its last <seconds>, per request
    const p = JSON.parse(readFileSync(process.argv[5] ?? '', 'utf8')) as CpuProfile
    process.stdout.write(ourFrames(profileWindow(p, 0, Number(process.argv[3]) * 1e6), Number(process.argv[4])).join('\n') + '\n')
  } else if (process.argv[2] === 'allocations') {
    //   node --import ./src/ts-resolve.ts bench/profile.ts allocations <requests> <before.heapprofile> <after.heapprofile> [file-substring …]
    //   bytes per request by allocating frame, before and after (bench/lib/heap-sampling.ts profiles)
    const read = (file: string | undefined): AllocationProfile => JSON.parse(readFileSync(file ?? '', 'utf8')) as AllocationProfile
    process.stdout.write(compareAllocations(read(process.argv[4]), read(process.argv[5]), Number(process.argv[3]), process.argv.slice(6)).join('\n') + '\n')
  } else if (process.argv[2] === 'compare') {
    const read = (file: string | undefined): CpuProfile => JSON.parse(readFileSync(file ?? '', 'utf8')) as CpuProfile
    process.stdout.write(comparePolicyShares(read(process.argv[3]), read(process.argv[4])).join('\n') + '\n')
  } else {
    await main()
  }
}
