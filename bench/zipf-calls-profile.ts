// Where the store's process spends its CPU per Zipf decision, by function, this checkout against others: one
// bench/zipf-calls.ts child run per checkout (the same seed, length and pacing; a fresh redis-server each, pinned as
// there) under `node --cpu-prof`, its samples' self time summed by function (name, file, line) over the whole run and
// divided by the run's decisions; then the functions whose self time per decision differs most. Only the samples of
// the run's last ZIPF_CALLS_SECONDS (+ 0.2 s: its close) count, so start-up (module loading, a baseline's tsx) does
// not. Bench files and node_modules a baseline loads from this checkout are named as this checkout's.
//   BENCH_BASELINE=/work/wt/base38 node --import ./src/ts-resolve.ts bench/zipf-calls-profile.ts
//   ZIPF_CALLS_* as bench/zipf-calls.ts (SECONDS, RATE, TIMEOUT_MS); PROFILE_TOP (default 30) rows per table;
//   PROFILE_INTERVAL_US (default 100): the sampling interval. The profiles stay in a temporary folder (printed).
//   PROFILE_HEAP=1: also V8's sampling heap profiler, garbage included, over the decisions (bench/lib/heap-sampling.ts,
//   started as the child's decisions start): bytes allocated per decision by frame, and the difference by file —
//   what the process's other threads (parallel scavenges, concurrent marking) spend their CPU on, which --cpu-prof,
//   sampling the main thread, does not show.
import { execFile } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative, resolve } from 'node:path'
import { promisify } from 'node:util'
import { startScratchRedis } from './lib/scratch-redis.js'
import { compareAllocations, summarizeAllocations, type AllocationProfile } from './lib/heap-sampling.js'
import { taskset } from './lib/proc-cpu.js'
import { sourceLoaderArgs } from './lib/source-loader.js'

const run = promisify(execFile)
const HERE = resolve(import.meta.dirname, '..')

interface ProfileNode { id: number, callFrame: { functionName: string, url: string, lineNumber: number }, children?: number[] }
interface CpuProfile { nodes: ProfileNode[], samples: number[], timeDeltas: number[], endTime: number }

/** Self µs by function ('name file:line', the file relative to its checkout) in one profile. */
function selfTimes (profile: CpuProfile, root: string, windowMicros: number): Map<string, number> {
  const frameOf = new Map<number, string>()
  for (const node of profile.nodes) {
    const { functionName, url, lineNumber } = node.callFrame
    const path = url.startsWith('file://') ? new URL(url).pathname : undefined
    const file = path === undefined ? url : path.startsWith(HERE + '/') ? relative(HERE, path) : relative(root, path)
    frameOf.set(node.id, `${functionName === '' ? '(anonymous)' : functionName} ${file}:${lineNumber + 1}`)
  }
  const times = new Map<string, number>()
  // The sample times, from the end back: only those of the window count.
  const at: number[] = []
  let clock = profile.endTime
  for (let index = profile.samples.length - 1; index >= 0; index--) { at[index] = clock; clock -= profile.timeDeltas[index] ?? 0 }
  const from = profile.endTime - windowMicros
  profile.samples.forEach((nodeId, index) => {
    if (at[index]! < from) return
    const frame = frameOf.get(nodeId) ?? '?'
    times.set(frame, (times.get(frame) ?? 0) + (profile.timeDeltas[index] ?? 0))
  })
  return times
}

/** One profiled child run of `variant`: its self times per decision (µs) and its decisions. */
async function profiled (variant: string, intervalMicros: number, windowMicros: number, heap: boolean): Promise<{ perDecision: Map<string, number>, decisions: number, cpuMicros: number, allocations: AllocationProfile | undefined }> {
  const redis = await startScratchRedis('zipf-profile')
  const dir = mkdtempSync(join(tmpdir(), 'zipf-profile-'))
  const heapFile = join(dir, 'heap.json')
  try {
    const command = [process.execPath, '--cpu-prof', '--cpu-prof-dir', dir, '--cpu-prof-interval', String(intervalMicros),
      ...sourceLoaderArgs(join(variant, 'src', 'gateway', 'server.ts')), ...(heap ? ['--import', join(HERE, 'bench/lib/heap-sampling.ts')] : []),
      join(HERE, 'bench/zipf-calls.ts'), '--child', variant, String(redis.port)]
    const env = heap ? { ...process.env, HEAP_SAMPLING_FILE: heapFile, HEAP_SAMPLING_ON: 'SIGUSR2' } : process.env
    const bin = taskset()
    const { stdout } = bin === null ? await run(command[0]!, command.slice(1), { cwd: HERE, env, maxBuffer: 1 << 20 }) : await run(bin, ['-c', '0', ...command], { cwd: HERE, env, maxBuffer: 1 << 20 })
    const result = JSON.parse(stdout.trim().split('\n').pop()!) as { decisions: number, cpuMicros: number }
    const file = readdirSync(dir).find((name) => name.endsWith('.cpuprofile'))!
    process.stderr.write(`${variant}: ${join(dir, file)}\n`)
    const times = selfTimes(JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile, variant, windowMicros)
    const allocations = heap ? JSON.parse(readFileSync(heapFile, 'utf8')) as AllocationProfile : undefined
    return { perDecision: new Map([...times].map(([frame, micros]) => [frame, micros / result.decisions])), decisions: result.decisions, cpuMicros: result.cpuMicros, allocations }
  } finally {
    await redis.stop()
  }
}

async function main (): Promise<void> {
  const top = Number(process.env.PROFILE_TOP ?? 30)
  const intervalMicros = Number(process.env.PROFILE_INTERVAL_US ?? 100)
  const heap = process.env.PROFILE_HEAP === '1'
  const windowMicros = (Number(process.env.ZIPF_CALLS_SECONDS ?? 6) + 0.2) * 1e6
  const variants = [HERE, ...(process.env.BENCH_BASELINE ?? '').split(',').filter((dir) => dir.trim() !== '').map((dir) => resolve(dir.trim()))]
  const runs = []
  for (const variant of variants) runs.push({ variant, ...await profiled(variant, intervalMicros, windowMicros, heap) })
  for (const { variant, perDecision, decisions, cpuMicros, allocations } of runs) {
    if (allocations !== undefined) console.log(`\n${variant}: allocations per decision\n${summarizeAllocations(allocations, decisions, top).join('\n')}`)
    console.log(`\n${variant}: ${decisions} decisions, process CPU ${(cpuMicros / decisions).toFixed(2)} µs per decision; top self time per decision (µs)`)
    for (const [frame, micros] of [...perDecision].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${micros.toFixed(3).padStart(8)}  ${frame}`)
  }
  // Frames compared by name and file only (lines move between checkouts).
  const byName = (times: Map<string, number>): Map<string, number> => {
    const out = new Map<string, number>()
    for (const [frame, micros] of times) { const name = frame.replace(/:\d+$/, ''); out.set(name, (out.get(name) ?? 0) + micros) }
    return out
  }
  const [first, ...others] = runs
  for (const other of others) {
    if (first!.allocations !== undefined && other.allocations !== undefined) {
      console.log(`\nallocations per decision, before: ${other.variant}, after: ${first!.variant}\n${compareAllocations(other.allocations, first!.allocations, first!.decisions).join('\n')}`)
    }
    const mine = byName(first!.perDecision)
    const theirs = byName(other.perDecision)
    const names = new Set([...mine.keys(), ...theirs.keys()])
    const diffs = [...names].map((name) => [name, (mine.get(name) ?? 0) - (theirs.get(name) ?? 0)] as const)
    console.log(`\n${first!.variant} less ${other.variant}: self µs per decision, largest differences`)
    for (const [name, micros] of diffs.sort((a, b) => Math.abs(b[1]) - Math.abs(a[1])).slice(0, top)) {
      console.log(`${micros >= 0 ? '+' : ''}${micros.toFixed(3).padStart(7)}  ${name}  (${(mine.get(name) ?? 0).toFixed(3)} vs ${(theirs.get(name) ?? 0).toFixed(3)})`)
    }
  }
}

await main()
