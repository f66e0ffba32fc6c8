// The sliding-window arithmetic in plain TypeScript: the in-process store and the accuracy replay run
// it, and lua/grant.lua computes the same counts in Redis (keeping a running total, so a request
// there reads a few fields instead of the whole ring). A window is a ring of fixed
// sub-buckets; the oldest bucket, which straddles the window's start, is counted whole, so a request
// is admitted only when every rolling window ending now already holds fewer than `limit` requests:
// never over-admits, and under-admits by at most one bucket's share of the window.

export interface WindowSpec {
  readonly name: 'minute' | 'day'
  readonly bucketMs: number
  /** Buckets counted: the window's own plus the partial oldest one. */
  readonly slots: number
  readonly windowMs: number
}

export const MINUTE_BUCKET_MS = 1_000
export const DAY_BUCKET_MS = 15 * 60_000
export const MINUTE_WINDOW: WindowSpec = Object.freeze({ name: 'minute', bucketMs: MINUTE_BUCKET_MS, slots: 61, windowMs: 60_000 })
export const DAY_WINDOW: WindowSpec = Object.freeze({ name: 'day', bucketMs: DAY_BUCKET_MS, slots: 97, windowMs: 86_400_000 })

/** One window's counts: `counts[j % slots]` holds bucket j for j in (last - slots, last]. */
export interface Ring {
  last: number
  readonly counts: Uint32Array
}

export function newRing (spec: WindowSpec): Ring {
  return { last: -1, counts: new Uint32Array(spec.slots) }
}

export interface WindowReading {
  /** Requests counted now (including the partial oldest bucket). */
  count: number
  /** Unix ms when the oldest counted bucket drops out; now + window when empty. */
  resetAt: number
  /** Unix ms when the window has room for `cost` more, if it has not now; 0 otherwise. */
  retryAt: number
}

/** Reads a window at `nowMs` without changing it. A clock that steps back is treated as standing still. */
export function readWindow (ring: Ring, spec: WindowSpec, nowMs: number, limit: number, out: WindowReading, cost = 1): WindowReading {
  const bucket = Math.floor(nowMs / spec.bucketMs)
  const from = Math.max(ring.last, bucket) - spec.slots + 1
  let count = 0
  let resetAt = 0
  for (let j = from; j <= ring.last; j++) {
    const c = ring.counts[j % spec.slots] ?? 0
    if (c > 0) {
      count += c
      if (resetAt === 0) resetAt = (j + spec.slots) * spec.bucketMs
    }
  }
  out.count = count
  out.resetAt = resetAt === 0 ? nowMs + spec.windowMs : resetAt
  out.retryAt = 0
  if (count + cost > limit) {
    const need = count + cost - limit
    let freed = 0
    for (let j = from; j <= ring.last; j++) {
      freed += ring.counts[j % spec.slots] ?? 0
      if (freed >= need) {
        out.retryAt = (j + spec.slots) * spec.bucketMs
        break
      }
    }
    if (out.retryAt === 0) out.retryAt = nowMs + spec.windowMs
  }
  return out
}

/** Counts `units` at `nowMs`, clearing the buckets that fell out of the window since the last one. */
export function addToWindow (ring: Ring, spec: WindowSpec, nowMs: number, units = 1): void {
  const bucket = Math.floor(nowMs / spec.bucketMs)
  if (bucket > ring.last) {
    for (let j = Math.max(ring.last + 1, bucket - spec.slots + 1); j <= bucket; j++) ring.counts[j % spec.slots] = 0
    ring.last = bucket
  }
  const slot = ring.last % spec.slots
  ring.counts[slot] = (ring.counts[slot] ?? 0) + units
}

/** Calendar month (UTC) of Unix ms, as year × 12 + month − 1, and the Unix ms the next one starts. */
export function calendarMonth (ms: number): { index: number, end: number } {
  const d = new Date(ms)
  return { index: d.getUTCFullYear() * 12 + d.getUTCMonth(), end: Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) }
}
