// The sliding-window arithmetic of the in-process store (lua/grant.lua counts the same in Redis). A
// window is a ring of fixed sub-buckets; the oldest, straddling the window's start, is counted whole,
// so a request is admitted only when every rolling window ending now holds fewer than `limit`:
// never over, and under by at most one bucket's share of the window.

/** A window: its name, bucket length, buckets counted (its own plus the partial oldest one), length. */
export interface WindowSpec { readonly name: 'minute' | 'day', readonly bucketMs: number, readonly slots: number, readonly windowMs: number }

export const MINUTE_BUCKET_MS = 1_000
export const DAY_BUCKET_MS = 15 * 60_000
export const MINUTE_WINDOW: WindowSpec = Object.freeze({ name: 'minute', bucketMs: MINUTE_BUCKET_MS, slots: 61, windowMs: 60_000 })
export const DAY_WINDOW: WindowSpec = Object.freeze({ name: 'day', bucketMs: DAY_BUCKET_MS, slots: 97, windowMs: 86_400_000 })

/** One window's counts: `counts[j % slots]` holds bucket j for j in (last - slots, last]. */
export interface Ring { last: number, readonly counts: Uint32Array }

export function newRing (spec: WindowSpec): Ring {
  return { last: -1, counts: new Uint32Array(spec.slots) }
}

/** A window's reading (store.ts's WindowState): `retryAt` when it has room for `cost` more, 0 when it has now. */
export interface WindowReading { count: number, resetAt: number, retryAt: number }

/** Reads a window at `nowMs` without changing it. A clock that steps back is treated as standing still. */
export function readWindow (ring: Ring, spec: WindowSpec, nowMs: number, limit: number, cost = 1): WindowReading {
  const bucket = Math.floor(nowMs / spec.bucketMs)
  const from = Math.max(ring.last, bucket) - spec.slots + 1
  let count = 0
  let resetAt = 0
  for (let older = from; older <= ring.last; older++) {
    const units = ring.counts[older % spec.slots] ?? 0
    if (units > 0 && resetAt === 0) resetAt = (older + spec.slots) * spec.bucketMs
    count += units
  }
  const out = { count, resetAt: resetAt === 0 ? nowMs + spec.windowMs : resetAt, retryAt: 0 }
  if (count + cost > limit) {
    out.retryAt = nowMs + spec.windowMs
    for (let older = from, freed = 0; older <= ring.last; older++) {
      freed += ring.counts[older % spec.slots] ?? 0
      if (freed >= count + cost - limit) {
        out.retryAt = (older + spec.slots) * spec.bucketMs
        break
      }
    }
  }
  return out
}

/** Counts `units` at `nowMs`, clearing the buckets that fell out of the window since the last one. */
export function addToWindow (ring: Ring, spec: WindowSpec, nowMs: number, units = 1): void {
  const bucket = Math.floor(nowMs / spec.bucketMs)
  if (bucket > ring.last) {
    for (let older = Math.max(ring.last + 1, bucket - spec.slots + 1); older <= bucket; older++) ring.counts[older % spec.slots] = 0
    ring.last = bucket
  }
  ring.counts[ring.last % spec.slots]! += units
}

/** Calendar month (UTC) of Unix ms, as year × 12 + month − 1, and the Unix ms it starts and the next one does. */
export function calendarMonth (ms: number): { index: number, start: number, end: number } {
  const date = new Date(ms)
  const [year, month] = [date.getUTCFullYear(), date.getUTCMonth()]
  return { index: year * 12 + month, start: Date.UTC(year, month, 1), end: Date.UTC(year, month + 1, 1) }
}
