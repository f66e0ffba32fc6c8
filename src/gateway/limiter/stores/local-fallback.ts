// STORE_ON_ERROR=local: a consumer's decision while Redis does not answer it, from what this
// process knew rather than from an empty window. The consumer's count at its last reply
// (knowledge.ts) is taken to stay in the window until everything it counted could have left
// (the reply's bucket + 61 s, and + 24 h 15 min for the day); this process's own fallback
// admissions are added exactly (write-back.ts); and of the room left, this process admits only
// its share: room ÷ (the gateway processes registered in Redis (process-registry.ts) + 1). The
// shares add up to less than the room: the one kept back absorbs admissions a process had not
// heard of when Redis stopped answering it, and a process the others do not count yet. Once
// nothing from before the outage can be in the window, each process has limit ÷ processes. A
// consumer this process has not heard of within DEFAULT_FALLBACK_FRESH_MS of the shard's last
// answer may have been counted by others since: until everything counted before the outage has
// left its window, it is taken as full but for DEFAULT_STALE_ALLOWANCE of its limit.
// docs/limiter-internals.md ("Through faults") gives the argument and the bound. Anonymous
// clients (per address, no quota to protect) get this process's share of their limit from an
// in-process window. Bans decided here (429s counted under the ban policy by the in-process
// store) last only while Redis does not answer (resilient.ts).
import type { BanPolicy, Limits } from '../../config/types.js'
import { ANONYMOUS_ID_PREFIX } from '../../edge/client-address.js'
import { DAY_WINDOW, MINUTE_WINDOW, type WindowSpec } from '../arithmetic.js'
import type { ConsumeOutcome, ConsumeResult, LimiterStore, WindowState } from '../store.js'
import type { Knowledge } from './knowledge.js'
import type { Ledger } from './write-back.js'

/** A consumer heard of within this long before the shard's last answer counts as known (its count as the fallback's start). */
export const DEFAULT_FALLBACK_FRESH_MS = 1_000
/** Of a consumer not heard of lately, the processes together admit at most this part of its limit until the outage's first minute has passed. */
export const DEFAULT_STALE_ALLOWANCE = 0.01
/** Before any reply of a shard, its Redis time is taken as the gateway clock within this margin. */
export const DEFAULT_CLOCK_MARGIN_MS = 1_000

const MB = MINUTE_WINDOW.bucketMs
const DB = DAY_WINDOW.bucketMs
const M_SLOTS = MINUTE_WINDOW.slots
const D_SLOTS = DAY_WINDOW.slots
/** Limits that make the in-process store refuse (and count the 429 under the ban policy). */
const SHUT: Limits = Object.freeze({ perMinute: 0, perDay: 0 })

export interface LocalFallbackOptions {
  knowledge: Knowledge
  ledger: Ledger
  /** Gateway processes sharing the consumers (at least 1). */
  processes: () => number
  shardOf: (id: string) => string
  /** Gateway time of the shard's first failure since it last answered; undefined: none. */
  failedSince: (shard: string) => number | undefined
  /** The in-process store keeping the fallback's bans (and anonymous clients' windows). */
  store: () => LimiterStore
  /** This process's calls for `id` that Redis has not answered yet: each may be admitted there (default none). */
  inFlight?: (id: string) => number
  /** The gateway clock, Unix ms. */
  now: () => number
  freshMs?: number
  staleAllowance?: number
  clockMarginMs?: number
}

export interface LocalFallback {
  /** The decision for one request; `late`: the request's own script, still queued in Redis. */
  consume: (id: string, limits: Limits, ban: BanPolicy | null, late?: Promise<ConsumeResult>) => Promise<ConsumeResult>
  peek: (id: string, limits: Limits) => Promise<ConsumeResult>
  /** Consumers the fallback answered since the last `drain` (their local bans and windows are to be forgotten). */
  drain: () => string[]
}

/** One window as this process sees it in an outage: what it may still admit, and when that grows. */
interface Share {
  readonly limit: number
  /** This process's part of the room left. */
  readonly share: number
  /** Its own fallback admissions in the window. */
  own: number
  /** Redis ms the known count leaves the window (0: nothing known counted). */
  readonly knownUntil: number
  /** Redis ms its oldest own admission leaves the window (0: none). */
  readonly ownUntil: number
  readonly windowMs: number
}

/** A count heard at Redis time `at`, while it can still be in `spec`'s window at `now` (it counted buckets up to `at`'s); `until` 0: none. */
function knownIn (spec: WindowSpec, count: number, at: number, now: number): { count: number, until: number } {
  const bucket = Math.floor(at / spec.bucketMs)
  if (Math.floor(now / spec.bucketMs) > bucket + spec.slots - 1) return { count: 0, until: 0 }
  return { count, until: (bucket + spec.slots) * spec.bucketMs }
}

/** This process's part of a window's room, its own admissions (the oldest in bucket `oldest`, -1: none), out of `processes`. */
function shareOf (spec: WindowSpec, limit: number, known: { count: number, until: number }, own: number, oldest: number, processes: number): Share {
  // While a count from before the outage is in force, one share is kept back: for admissions
  // Redis counted that this process had not heard of yet, and a process the others do not count.
  const parts = known.until > 0 ? processes + 1 : processes
  return {
    limit,
    share: Math.max(0, Math.floor((limit - known.count) / parts)),
    own,
    knownUntil: known.until,
    ownUntil: oldest < 0 ? 0 : (oldest + spec.slots) * spec.bucketMs,
    windowMs: spec.windowMs
  }
}

function windowState (w: Share, now: number): WindowState {
  const windowMs = w.windowMs
  const frees = [w.knownUntil, w.ownUntil].filter((t) => t > now)
  const resetAt = frees.length > 0 ? Math.min(...frees) : now + windowMs
  return {
    count: w.limit - (w.share - w.own),
    resetAt,
    retryAt: w.own >= w.share ? Math.max(now + 1, resetAt) : 0
  }
}

export function createLocalFallback (opts: LocalFallbackOptions): LocalFallback {
  const { knowledge, ledger } = opts
  const freshMs = opts.freshMs ?? DEFAULT_FALLBACK_FRESH_MS
  const allowance = opts.staleAllowance ?? DEFAULT_STALE_ALLOWANCE
  const margin = opts.clockMarginMs ?? DEFAULT_CLOCK_MARGIN_MS
  const touched = new Set<string>()

  /** Anonymous clients: this process's share of the limit, counted in process from an empty window. */
  async function anonymous (id: string, limits: Limits, write: boolean): Promise<ConsumeResult> {
    const p = Math.max(1, opts.processes())
    const share = { perMinute: Math.floor(limits.perMinute / p), perDay: Math.floor(limits.perDay / p) }
    touched.add(id)
    const r = write ? await opts.store().consume(id, share, null) : await opts.store().peek(id, share)
    return {
      ...r,
      minute: { ...r.minute, count: r.minute.count + limits.perMinute - share.perMinute },
      day: { ...r.day, count: r.day.count + limits.perDay - share.perDay }
    }
  }

  async function decide (id: string, limits: Limits, ban: BanPolicy | null, write: boolean, late?: Promise<ConsumeResult>): Promise<ConsumeResult> {
    if (id.startsWith(ANONYMOUS_ID_PREFIX)) return await anonymous(id, limits, write)
    const x = opts.now()
    const shard = opts.shardOf(id)
    const clock = knowledge.clock(shard)
    const lo = clock?.lo ?? -margin
    const hi = clock?.hi ?? margin
    const now = x + lo // the earliest Redis time it can be: what is known leaves no window early
    const minuteNow = Math.floor(now / MB)
    const dayNow = Math.floor(now / DB)
    const k = knowledge.get(id)
    const result = (outcome: ConsumeOutcome, minute: WindowState, day: WindowState, bannedUntil: number): ConsumeResult =>
      ({ outcome, now, minute, day, bannedUntil })

    if (k !== undefined && k.bannedUntil > now) {
      const idle = { count: 0, resetAt: 0, retryAt: 0 }
      return result('key_banned', idle, idle, k.bannedUntil)
    }
    const minuteKnown = knownIn(MINUTE_WINDOW, k?.minute ?? 0, k?.at ?? Number.NEGATIVE_INFINITY, now)
    const fresh = k !== undefined && clock !== undefined && k.at >= clock.at - freshMs
    if (!fresh) {
      // Others may have counted it since this process last heard: until what was counted before
      // the outage has left the window, only the allowance is taken as free.
      const since = opts.failedSince(shard) ?? x
      const until = (Math.floor((since + hi) / MB) + M_SLOTS) * MB
      const assumed = limits.perMinute - Math.floor(limits.perMinute * allowance)
      if (now < until && assumed > minuteKnown.count) {
        minuteKnown.count = assumed
        minuteKnown.until = until
      }
    }
    const dayKnown = knownIn(DAY_WINDOW, k?.day ?? 0, k?.at ?? Number.NEGATIVE_INFINITY, now)
    const p = Math.max(1, opts.processes())
    // The request's own call (`late`) is this admission itself, not another.
    const pending = (opts.inFlight?.(id) ?? 0) - (late === undefined ? 0 : 1)
    if (pending > 0) {
      // Calls still queued in Redis may all be admitted there when it answers, and every other
      // process may have as many queued: room they can take is not this process's to share.
      const extra = pending * p
      minuteKnown.count += extra
      minuteKnown.until = Math.max(minuteKnown.until, (Math.floor((x + hi) / MB) + M_SLOTS) * MB)
      dayKnown.count += extra
      dayKnown.until = Math.max(dayKnown.until, (Math.floor((x + hi) / DB) + D_SLOTS) * DB)
    }
    const own = ledger.own(id, minuteNow - M_SLOTS + 1, dayNow - D_SLOTS + 1)
    const minute = shareOf(MINUTE_WINDOW, limits.perMinute, minuteKnown, own.minute, own.oldestMinute, p)
    const day = shareOf(DAY_WINDOW, limits.perDay, dayKnown, own.day, own.oldestDay, p)
    const store = opts.store()
    if (write) touched.add(id)
    const local = await store.peek(id, limits)
    const toRedisTime = (t: number): number => t - x + now
    if (local.outcome === 'key_banned') return result('key_banned', windowState(minute, now), windowState(day, now), toRedisTime(local.bannedUntil))
    if (minute.own < minute.share && day.own < day.share) {
      if (write) {
        // Counted in the bucket of the latest Redis time it can be: it never leaves a window early.
        ledger.record(id, Math.floor((x + hi) / MB), Math.floor((x + hi) / DB), late)
        minute.own++
        day.own++
      }
      return result('ok', windowState(minute, now), windowState(day, now), 0)
    }
    const refused = write ? await store.consume(id, SHUT, ban) : undefined
    const outcome = refused?.outcome === 'key_banned' || refused?.outcome === 'ban_started' ? refused.outcome : 'rate_limited'
    return result(outcome, windowState(minute, now), windowState(day, now), refused === undefined || refused.bannedUntil === 0 ? 0 : toRedisTime(refused.bannedUntil))
  }

  return {
    consume: (id, limits, ban, late) => decide(id, limits, ban, true, late),
    peek: (id, limits) => decide(id, limits, null, false),
    drain () {
      const ids = [...touched]
      touched.clear()
      return ids
    }
  }
}
