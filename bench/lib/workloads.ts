// The throughput workloads of `npm run bench` and what the gateway is held to on each: one hot
// key (served from grants: units counted ahead for the rest of a second), keys used in turn (no
// consumer hot: every request waits for a grant call), and many consumers drawn by a Zipf law (real API traffic: a few busy, a long tail of
// quiet ones). Selected with BENCH_WORKLOADS=hot,keys,zipf. Also: how many script calls a run made,
// so the report can say how many decisions each call carried.
import { DEFAULT_ZIPF_CONSUMERS, DEFAULT_ZIPF_EXPONENT, DEFAULT_ZIPF_SEED, DEFAULT_ZIPF_SEQUENCE_LENGTH, sequenceShape, zipfSequence, type SequenceShape } from './zipf.js'

/** Keys of the many-keys workload, used in turn (one per request). */
export const DEFAULT_ROTATING_KEYS = 1_000
export const WORKLOAD_IDS = ['hot', 'keys', 'zipf'] as const
export type WorkloadId = typeof WORKLOAD_IDS[number]

/** Redis commands a gateway may send per request on each workload (issue 21's targets). */
export const MAX_COMMANDS_PER_REQUEST: Record<WorkloadId, number> = { hot: 0.05, keys: 0.5, zipf: 0.3 }

/** Commands that run a script: each one call, however many decisions it carries. */
export const SCRIPT_COMMANDS = ['evalsha', 'eval', 'evalsha_ro', 'eval_ro', 'fcall', 'fcall_ro'] as const

export interface Workload {
  id: WorkloadId
  /** Short name: the key of the workload in latest.json. */
  name: string
  /** Heading in latest.md. */
  title: string
  tokens: string[]
  /** Indices into `tokens`, one per request (the Zipf draw); unset: `tokens` in turn. */
  order?: number[]
  /** The drawn traffic's shape, for the report. */
  shape?: SequenceShape
}

/** Bearer token of config key `i` (bench/config-load.ts writes their digests). */
export const benchToken = (i: number): string => `bench-key-${i}`

/** Keys the config must hold for every workload. */
export const CONFIG_KEYS = Math.max(DEFAULT_ROTATING_KEYS, DEFAULT_ZIPF_CONSUMERS)

/** BENCH_WORKLOADS: a comma list of ids (empty: all); an unknown id is an error, not a silently empty run. */
export function selectWorkloads (raw: string | undefined): Set<WorkloadId> {
  const ids = (raw ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '')
  if (ids.length === 0) return new Set(WORKLOAD_IDS)
  const known = new Set<string>(WORKLOAD_IDS)
  const unknown = ids.filter((id) => !known.has(id))
  if (unknown.length > 0) throw new Error(`BENCH_WORKLOADS: unknown ${unknown.join(', ')} (known: ${WORKLOAD_IDS.join(', ')})`)
  return new Set(ids as WorkloadId[])
}

/** The selected workloads, in the report's order; the Zipf sequence drawn only when selected. */
export function buildWorkloads (selected: Set<WorkloadId>): Workload[] {
  const out: Workload[] = []
  if (selected.has('hot')) out.push({ id: 'hot', name: 'hot key', title: 'One hot key', tokens: [benchToken(0)] })
  if (selected.has('keys')) {
    const name = `${DEFAULT_ROTATING_KEYS.toLocaleString('en')} keys`
    out.push({ id: 'keys', name, title: `${name}, one per request in turn`, tokens: Array.from({ length: DEFAULT_ROTATING_KEYS }, (_, i) => benchToken(i)) })
  }
  if (selected.has('zipf')) {
    const order = zipfSequence({ consumers: DEFAULT_ZIPF_CONSUMERS, exponent: DEFAULT_ZIPF_EXPONENT, length: DEFAULT_ZIPF_SEQUENCE_LENGTH, seed: DEFAULT_ZIPF_SEED })
    const shape = sequenceShape(order)
    out.push({
      id: 'zipf',
      name: `${DEFAULT_ZIPF_CONSUMERS.toLocaleString('en')} consumers, Zipf s = ${DEFAULT_ZIPF_EXPONENT}`,
      title: `${DEFAULT_ZIPF_CONSUMERS.toLocaleString('en')} consumers drawn by a Zipf law (s = ${DEFAULT_ZIPF_EXPONENT})`,
      tokens: Array.from({ length: DEFAULT_ZIPF_CONSUMERS }, (_, i) => benchToken(i)),
      order,
      shape
    })
  }
  return out
}

/** One line on the Zipf traffic: how concentrated it is. */
export function describeShape (shape: SequenceShape, length: number): string {
  const pct = (x: number): string => `${(x * 100).toFixed(1)} %`
  return `A sequence of ${length.toLocaleString('en')} requests drawn once (seed ${DEFAULT_ZIPF_SEED}) and replayed from its start by every run: ` +
    `${shape.distinct.toLocaleString('en')} distinct consumers; the busiest sends ${pct(shape.top1)} of the requests, the busiest 10 ${pct(shape.top10)}, the busiest 100 ${pct(shape.top100)}; ` +
    `${shape.atLeastOnePerThousand} consumers send ≥ 0.1 % each.`
}

/** What one run actually sends: the sequence's first `requests` entries (every run replays from the start). */
export function describePrefix (order: readonly number[], requests: number): string {
  const n = Math.min(order.length, Math.max(0, requests))
  if (n === 0) return ''
  const shape = sequenceShape(order.slice(0, n))
  return `A run of ≈ ${n.toLocaleString('en')} requests (the gateway on Redis's median) sends the first ${n.toLocaleString('en')}: ` +
    `${shape.distinct.toLocaleString('en')} distinct consumers, the busiest ${(shape.top1 * 100).toFixed(1)} %, the busiest 100 ${(shape.top100 * 100).toFixed(1)} %.`
}

/** Script calls among commandstats deltas (command → calls). */
export function scriptCalls (calls: Record<string, number>): number {
  return SCRIPT_COMMANDS.reduce((a, name) => a + (calls[name] ?? 0), 0)
}
