// CPU per decision of the in-process store alone, this checkout against another (BENCH_BASELINE), so
// that a change worth a µs per request can be told from the noise a loaded machine puts in an
// end-to-end figure (hundreds of µs per request, ±50 % between rounds): the real createMemoryStore of
// each checkout, in a child process pinned to one core, driven with the hot key (one id) and with
// the bench's Zipf draw (10,000 consumers, s = 1.1, bench/lib/zipf.ts) — every decision awaited, as
// the limiter's hook awaits it — after a warm-up of the same traffic; CPU from process.cpuUsage.
// Rounds alternate the checkouts (the order reversed every other round); prints medians and spread.
//   BENCH_BASELINE=/path/to/checkout node --import ./src/ts-resolve.ts bench/memory-store-cpu.ts
//   MEMORY_STORE_DECISIONS (200000 a measured run) MEMORY_STORE_ROUNDS (7)
import { execFile } from 'node:child_process'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'
import { median } from './lib/load.js'
import { taskset } from './lib/proc-cpu.js'
import { sourceLoaderArgs } from './lib/source-loader.js'
import { DEFAULT_ZIPF_CONSUMERS, DEFAULT_ZIPF_EXPONENT, DEFAULT_ZIPF_SEED, DEFAULT_ZIPF_SEQUENCE_LENGTH, zipfSequence } from './lib/zipf.js'

const run = promisify(execFile)
const HERE = resolve(import.meta.dirname, '..')
export const DEFAULT_DECISIONS = 200_000
export const DEFAULT_ROUNDS = 7
/** Limits no run reaches, a ban policy as the bench's plans carry (never triggered: nothing is refused). */
const ASK = { limits: { perMinute: 1_000_000_000, perDay: 1_000_000_000_000 }, ban: { threshold: 1_000_000, windowSeconds: 60, durationSeconds: 60, maxDurationSeconds: 3_600 }, cost: 1, monthLimit: 0, overage: true }

interface StoreModule { createMemoryStore: () => { consume: (id: string, ask: unknown) => Promise<{ outcome: string }> } }

/** ns of CPU per decision over `decisions` decisions of `ids` in turn (after as many as warm-up). */
async function measure (root: string, ids: readonly string[], decisions: number): Promise<number> {
  const { createMemoryStore } = await import(join(root, 'src/gateway/limiter/memory/store.ts')) as StoreModule
  const store = createMemoryStore()
  const drive = async (count: number): Promise<void> => {
    for (let index = 0; index < count; index++) {
      const result = await store.consume(ids[index % ids.length]!, ASK)
      if (result.outcome !== 'ok') throw new Error(`unexpected ${result.outcome}`)
    }
  }
  await drive(decisions)
  const before = process.cpuUsage()
  await drive(decisions)
  const used = process.cpuUsage(before)
  return (used.user + used.system) * 1000 / decisions
}

async function child (root: string, workload: string, decisions: number): Promise<void> {
  const ids = workload === 'hot'
    ? ['key-0']
    : zipfSequence({ consumers: DEFAULT_ZIPF_CONSUMERS, exponent: DEFAULT_ZIPF_EXPONENT, length: DEFAULT_ZIPF_SEQUENCE_LENGTH, seed: DEFAULT_ZIPF_SEED }).map((consumer) => `key-${consumer}`)
  process.stdout.write(JSON.stringify({ root, workload, nsPerDecision: await measure(root, ids, decisions) }) + '\n')
}

async function main (): Promise<void> {
  const [mode, root, workload] = process.argv.slice(2)
  const decisions = Number(process.env.MEMORY_STORE_DECISIONS ?? DEFAULT_DECISIONS)
  if (mode === '--child') return await child(root!, workload!, decisions)
  const rounds = Number(process.env.MEMORY_STORE_ROUNDS ?? DEFAULT_ROUNDS)
  const baseline = process.env.BENCH_BASELINE
  const variants = [...(baseline === undefined || baseline === '' ? [] : [['before', resolve(baseline)]]), ['after', HERE]] as Array<[string, string]>
  const results = new Map<string, number[]>()
  const bin = taskset()
  for (let round = 0; round < rounds; round++) {
    for (const [name, variantRoot] of round % 2 === 0 ? variants : [...variants].reverse()) {
      for (const load of ['hot', 'zipf']) {
        const command = [process.execPath, ...sourceLoaderArgs(join(variantRoot, 'src', 'gateway', 'server.ts')), join(HERE, 'bench/memory-store-cpu.ts'), '--child', variantRoot, load]
        const { stdout } = bin === null ? await run(command[0]!, command.slice(1), { cwd: HERE }) : await run(bin, ['-c', '1', ...command], { cwd: HERE })
        const { nsPerDecision } = JSON.parse(stdout.trim().split('\n').pop()!) as { nsPerDecision: number }
        const key = `${name} ${load}`
        results.set(key, [...(results.get(key) ?? []), nsPerDecision])
        process.stderr.write(`round ${round + 1} ${key}: ${nsPerDecision.toFixed(0)} ns per decision\n`)
      }
    }
  }
  console.log(`in-process store alone, CPU ns per decision (${decisions} decisions a run after as many of warm-up, pinned, ${rounds} interleaved rounds): median (range)`)
  console.log('| workload | before | after | after − before, median of rounds |')
  console.log('|---|---:|---:|---:|')
  for (const load of ['hot', 'zipf']) {
    const before = results.get(`before ${load}`) ?? []
    const after = results.get(`after ${load}`) ?? []
    const cell = (xs: number[]): string => xs.length === 0 ? '–' : `${median(xs).toFixed(0)} (${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)})`
    const deltas = after.map((value, index) => value - (before[index] ?? NaN)).filter((delta) => Number.isFinite(delta))
    console.log(`| ${load} | ${cell(before)} | ${cell(after)} | ${deltas.length === 0 ? '–' : `${median(deltas).toFixed(0)} (${deltas.filter((delta) => delta < 0).length} of ${deltas.length} rounds lower)`} |`)
  }
}

await main()
