// Accuracy bench: replays traffic patterns on a virtual clock (deterministic, no sleeping) through
// our sliding window (the arithmetic the stores run), a fixed window (Kong OSS, Envoy ratelimit,
// @fastify/rate-limit) and the two-counter estimate (Cloudflare), against an exact per-request log
// as the ideal. Over-admission: most admissions in any rolling window beyond the limit (ours must be 0).
// Under-admission: admissions the ideal makes and the model refuses, in %. Run: npm run bench:accuracy
import { addToWindow, DAY_WINDOW, MINUTE_WINDOW, newRing, readWindow, type WindowSpec } from '../src/gateway/limiter/arithmetic.js'

const MINUTE_LIMIT = 60
const DAY_LIMIT = 1000
const HOUR = 3_600_000
const START = Date.UTC(2030, 0, 1) + 12_345

type Admit = (t: number) => boolean

interface Model { name: string, make: (spec: WindowSpec, limit: number) => Admit }

const models: Model[] = [
  {
    name: 'exact log (ideal)',
    make: (spec, limit) => {
      const log: number[] = []
      let head = 0
      return (t) => {
        while (head < log.length && log[head]! <= t - spec.windowMs) head++
        if (log.length - head >= limit) return false
        log.push(t)
        return true
      }
    }
  },
  {
    name: 'ours (sub-buckets)',
    make: (spec, limit) => {
      const ring = newRing(spec)
      const reading = { count: 0, resetAt: 0, retryAt: 0 }
      return (t) => {
        if (readWindow(ring, spec, t, limit, reading).count >= limit) return false
        addToWindow(ring, spec, t)
        return true
      }
    }
  },
  {
    name: 'fixed window',
    make: (spec, limit) => {
      let window = -1
      let count = 0
      return (t) => {
        const w = Math.floor(t / spec.windowMs)
        if (w !== window) { window = w; count = 0 }
        if (count >= limit) return false
        count++
        return true
      }
    }
  },
  {
    name: 'two counters',
    make: (spec, limit) => {
      let window = -1
      let current = 0
      let previous = 0
      return (t) => {
        const w = Math.floor(t / spec.windowMs)
        if (w !== window) { previous = w === window + 1 ? current : 0; current = 0; window = w }
        const elapsed = (t - w * spec.windowMs) / spec.windowMs
        if (previous * (1 - elapsed) + current >= limit) return false
        current++
        return true
      }
    }
  }
]

function prng (seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let x = Math.imul(s ^ (s >>> 15), 1 | s)
    x ^= x + Math.imul(x ^ (x >>> 7), 61 | x)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

function poisson (ratePerMs: number, durationMs: number, seed: number): number[] {
  const random = prng(seed)
  const times: number[] = []
  for (let t = START; t < START + durationMs;) {
    t += Math.max(1, Math.round(-Math.log(1 - random()) / ratePerMs))
    times.push(t)
  }
  return times
}

function every (intervalMs: number, durationMs: number): number[] {
  const times: number[] = []
  for (let t = START; t < START + durationMs; t += intervalMs) times.push(t)
  return times
}

/** `size` requests just before and just after each window edge. */
function edgeBursts (spec: WindowSpec, size: number, windows: number): number[] {
  const times: number[] = []
  const first = Math.ceil(START / spec.windowMs) * spec.windowMs
  for (let k = 1; k <= windows; k++) {
    const edge = first + k * spec.windowMs
    for (let i = 0; i < size; i++) times.push(edge - 100 + i % 50)
    for (let i = 0; i < size; i++) times.push(edge + 100 + i % 50)
  }
  return times.sort((a, b) => a - b)
}

interface Pattern { name: string, spec: WindowSpec, limit: number, times: number[] }

const patterns: Pattern[] = [
  { name: 'steady at the minute limit', spec: MINUTE_WINDOW, limit: MINUTE_LIMIT, times: every(60_000 / MINUTE_LIMIT, 6 * HOUR) },
  { name: 'steady at 2x the minute limit', spec: MINUTE_WINDOW, limit: MINUTE_LIMIT, times: every(30_000 / MINUTE_LIMIT, 6 * HOUR) },
  { name: 'bursts at minute edges', spec: MINUTE_WINDOW, limit: MINUTE_LIMIT, times: edgeBursts(MINUTE_WINDOW, MINUTE_LIMIT, 120) },
  { name: 'Poisson at the minute limit', spec: MINUTE_WINDOW, limit: MINUTE_LIMIT, times: poisson(MINUTE_LIMIT / 60_000, 6 * HOUR, 1) },
  { name: 'Poisson at 3x the minute limit', spec: MINUTE_WINDOW, limit: MINUTE_LIMIT, times: poisson(3 * MINUTE_LIMIT / 60_000, 6 * HOUR, 2) },
  { name: 'steady at the day limit', spec: DAY_WINDOW, limit: DAY_LIMIT, times: every(86_400_000 / DAY_LIMIT, 10 * 24 * HOUR) },
  { name: 'bursts at day edges', spec: DAY_WINDOW, limit: DAY_LIMIT, times: edgeBursts(DAY_WINDOW, DAY_LIMIT, 10) },
  { name: 'Poisson at 2x the day limit', spec: DAY_WINDOW, limit: DAY_LIMIT, times: poisson(2 * DAY_LIMIT / 86_400_000, 10 * 24 * HOUR, 3) }
]

/** Most admissions in any rolling window (t - w, t]. */
function fullestWindow (admitted: number[], windowMs: number): number {
  let worst = 0
  for (let i = 0, j = 0; i < admitted.length; i++) {
    while (admitted[j]! <= admitted[i]! - windowMs) j++
    worst = Math.max(worst, i - j + 1)
  }
  return worst
}

export interface Row { pattern: string, model: string, offered: number, admitted: number, over: number, underPct: number }

export function runAccuracy (): Row[] {
  const rows: Row[] = []
  for (const pattern of patterns) {
    const results = models.map((model) => {
      const admit = model.make(pattern.spec, pattern.limit)
      const admitted = pattern.times.filter((t) => admit(t))
      return { model: model.name, admitted }
    })
    const ideal = results[0]!.admitted.length
    for (const { model, admitted } of results) {
      rows.push({
        pattern: pattern.name,
        model,
        offered: pattern.times.length,
        admitted: admitted.length,
        over: Math.max(0, fullestWindow(admitted, pattern.spec.windowMs) - pattern.limit),
        underPct: Math.max(0, (ideal - admitted.length) / ideal * 100)
      })
    }
  }
  return rows
}

function table (rows: Row[]): string {
  const header = ['pattern', 'model', 'offered', 'admitted', 'over-admission (max excess in a rolling window)', 'under-admission %']
  const lines = rows.map((r) => [r.pattern, r.model, String(r.offered), String(r.admitted), String(r.over), r.underPct.toFixed(2)])
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)))
  const fmt = (cells: string[]): string => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`
  return [fmt(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...lines.map(fmt)].join('\n')
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const rows = runAccuracy()
  console.log(`Limits: ${MINUTE_LIMIT}/min (1 s buckets), ${DAY_LIMIT}/day (15 min buckets)\n`)
  console.log(table(rows))
  const ours = rows.filter((r) => r.model.startsWith('ours'))
  const bad = ours.filter((r) => r.over > 0 || (r.pattern.startsWith('steady at the') && r.underPct > 2))
  if (bad.length > 0) {
    console.error(`\nFAIL: ${bad.map((r) => r.pattern).join(', ')}`)
    process.exitCode = 1
  }
}
