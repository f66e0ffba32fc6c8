// The long-tail workload of the bench: which consumer sends each request when thousands of them
// share an API, a few busy and most quiet — consumer of rank k drawn with probability ∝ 1 / k^s.
// The sequence is drawn once, from a fixed seed, before any run: every configuration and every
// round replays the same requests in the same order, so runs compare as the other workloads do,
// and the load generator does no random draws of its own while it measures.

/** Consumers of the Zipf workload (keys in its config, ranks of the law). */
export const DEFAULT_ZIPF_CONSUMERS = 10_000
/** Exponent of the law: ≈ 1.1 is what API traffic by consumer tends to show. */
export const DEFAULT_ZIPF_EXPONENT = 1.1
/** Requests in the precomputed sequence (replayed from its start every run, wrapping if a run outlasts it). */
export const DEFAULT_ZIPF_SEQUENCE_LENGTH = 1 << 18
export const DEFAULT_ZIPF_SEED = 21

/** mulberry32: a small, fast, seeded PRNG with a full 2^32 period — enough for a load sequence. */
export function seededRandom (seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}

export interface ZipfOptions { consumers: number, exponent: number, length: number, seed: number }

/** `length` draws of a 0-based rank in [0, consumers): rank 0 the busiest. Deterministic in `seed`. */
export function zipfSequence (opts: ZipfOptions): number[] {
  const cdf = new Float64Array(opts.consumers)
  let sum = 0
  for (let k = 0; k < opts.consumers; k++) {
    sum += 1 / Math.pow(k + 1, opts.exponent)
    cdf[k] = sum
  }
  const random = seededRandom(opts.seed)
  const out = new Array<number>(opts.length)
  for (let i = 0; i < opts.length; i++) {
    const u = random() * sum
    let lo = 0
    let hi = opts.consumers - 1
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if ((cdf[mid] ?? Infinity) < u) lo = mid + 1; else hi = mid
    }
    out[i] = lo
  }
  return out
}

export interface SequenceShape {
  /** Distinct consumers in the sequence. */
  distinct: number
  /** Share of requests sent by the busiest consumer, and by the busiest 10 and 100. */
  top1: number
  top10: number
  top100: number
  /** Consumers that send at least this share of the requests (1 / threshold) — to set against the grant threshold (HOT_RATE). */
  atLeastOnePerThousand: number
}

/** What the traffic of a sequence looks like, for the report. */
export function sequenceShape (sequence: readonly number[]): SequenceShape {
  const counts = new Map<number, number>()
  for (const k of sequence) counts.set(k, (counts.get(k) ?? 0) + 1)
  const sorted = [...counts.values()].sort((a, b) => b - a)
  const n = Math.max(1, sequence.length)
  const share = (top: number): number => sorted.slice(0, top).reduce((a, x) => a + x, 0) / n
  return {
    distinct: counts.size,
    top1: share(1),
    top10: share(10),
    top100: share(100),
    atLeastOnePerThousand: sorted.filter((c) => c / n >= 0.001).length
  }
}
