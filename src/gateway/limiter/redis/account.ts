// What one process holds for one limiter id on the Redis path, and the arithmetic on it: the pool (units Redis
// counted for this process in one minute bucket, spent until that bucket ends by the shard's clock, then given back),
// the reserve (units Redis keeps back for this process, spent only while the shard does not answer, written back
// after), the outage allowance (admitted uncounted while the shard does not answer, at most a stated share of the
// limit, written back after), the ledger (what it admitted per bucket still in a window, re-seeded into a shard that
// lost its data), the requests waiting for a call, and the answers built from them.
import type { BanPolicy, Limits } from '../../config/types.js'
import { calendarMonth, DAY_BUCKET_MS, DAY_WINDOW, MINUTE_BUCKET_MS, MINUTE_WINDOW } from '../arithmetic.js'
import type { ConsumeOutcome, ConsumeResult, WindowState } from '../store.js'
import type { ShardClock } from './clock.js'
import type { Adjustment, GrantEntry, GrantReply, WindowReply } from './scripts.js'

/** How long Redis keeps a reserve after the call that set it (grant.lua's RESERVE_TTL_MS). */
export const RESERVE_TTL_MS = 120_000
/** A reserve admission needs Redis to keep the reserve this long after it: the minute window and a margin. */
export const RESERVE_COVER_MS = 62_000
/** A grant is spent only this far inside its bucket (a TIME read in whole ms, timer granularity). */
export const SPEND_MARGIN_MS = 2
/** The allowance is counted per this much local time: a rolling minute of Redis's, with room for drift. */
export const ALLOWANCE_WINDOW_MS = 62_000
/** No allowance for a consumer whose room, last seen, would not last this long at its rate (it races its limit). */
export const ALLOWANCE_SLACK_MS = 60_000
/** No allowance for a consumer never answered here by Redis that arrives this often per second (a burst, maybe racing its limit). */
export const ALLOWANCE_UNSEEN_RATE = 5

/** A request waiting for a grant call; `attempts`: calls whose units came too late to spend for it. */
export interface Waiting { readonly cost: number, readonly resolve: (result: ConsumeResult) => void, readonly reject: (err: Error) => void, attempts: number }

export class Account {
  limits: Limits = { perMinute: 0, perDay: 0 }
  /** 0: no month limit; a soft month is counted but never refuses (Ask.overage). */
  monthLimit = 0
  monthSoft = true
  ban: BanPolicy | null = null
  /** The pool and its buckets (minute, day, month) by Redis's clock; blocks granted in its minute bucket. */
  pool = 0
  granted = 0
  giveBack = false
  bucket = -1
  dayBucket = 0
  month = 0
  waiting: Waiting[] = []
  /** A write call of this account is queued or in flight. */
  calling = false
  /** The last reply (headers), its Redis time and the local instant it was read. */
  view: GrantReply | undefined = undefined
  viewAt = 0
  viewLocal = 0
  /** Requests seen in local second `second` and the one before, and the last one's instant. */
  second = 0
  seen = 0
  seenBefore = 0
  lastSeen = 0
  /** The reserve, until when (Redis ms) Redis keeps it; in a call's flight, the most it may come to. */
  reserve = 0
  reserveUntil = 0
  reserveCap: number | undefined = undefined
  /** Reserve admissions not yet counted in Redis, and give-backs to send. */
  unwritten: Adjustment[] = []
  returns: Adjustment[] = []
  /** Allowance admissions not yet counted in Redis, and every allowance admission of the last ALLOWANCE_WINDOW_MS (local ms, cost). */
  allowanceUnwritten: Adjustment[] = []
  allowanceSpent: Array<{ readonly at: number, readonly cost: number }> = []
  readonly ledger = { minute: new Map<number, number>(), day: new Map<number, number>(), month: new Map<number, number>() }

  constructor (readonly id: string, readonly key: string, readonly shard: string) {}
}

/** Counts one request (for sizing): requests per second, from this local second and the last. */
export function countRequest (a: Account, x: number): void {
  const second = Math.floor(x / 1000)
  if (second !== a.second) {
    a.seenBefore = second === a.second + 1 ? a.seen : 0
    a.seen = 0
    a.second = second
  }
  a.seen++
  a.lastSeen = x
}

export function rate (a: Account, x: number): number {
  return Math.floor(x / 1000) === a.second ? a.seen + a.seenBefore * (1 - (x % 1000) / 1000) : 0
}

/** True while the pool's bucket is not over by the latest Redis time at local `x`. */
export function poolLive (a: Account, clock: ShardClock, x: number): boolean {
  const latest = clock.latest(x)
  return a.pool > 0 && latest !== undefined && latest < (a.bucket + 1) * MINUTE_BUCKET_MS - SPEND_MARGIN_MS
}

function givePoolBack (a: Account): void {
  if (a.pool > 0) a.returns.push({ minute: a.bucket, day: a.dayBucket, month: a.month, delta: -a.pool })
  a.pool = 0
}

/** A pool whose bucket is over becomes a give-back (it will never be spent); true if none is live. */
export function expirePool (a: Account, clock: ShardClock, x: number): boolean {
  if (poolLive(a, clock, x)) return false
  givePoolBack(a)
  return true
}

/** Units just counted at Redis time `redisNow` join the pool (an older pool is given back), `block` of them a block. */
export function fillPool (a: Account, units: number, block: number, redisNow: number): void {
  const bucket = Math.floor(redisNow / MINUTE_BUCKET_MS)
  if (bucket !== a.bucket) { givePoolBack(a); a.granted = 0 }
  a.granted += block
  a.bucket = bucket
  a.dayBucket = Math.floor(redisNow / DAY_BUCKET_MS)
  a.month = a.monthLimit > 0 ? calendarMonth(redisNow).index : 0
  a.pool += units
}

/** Records an admission of `cost` units in its buckets, for a re-seed. */
function record (a: Account, minute: number, day: number, month: number, cost: number): void {
  const { ledger } = a
  ledger.minute.set(minute, (ledger.minute.get(minute) ?? 0) + cost)
  ledger.day.set(day, (ledger.day.get(day) ?? 0) + cost)
  if (month > 0) ledger.month.set(month, (ledger.month.get(month) ?? 0) + cost)
}

/** Drops from the ledger what left every window by Redis time `t` at the earliest (the sweep's, once a second). */
export function pruneLedger ({ ledger }: Account, t: number): void {
  for (const b of ledger.minute.keys()) if (b <= Math.floor(t / MINUTE_BUCKET_MS) - MINUTE_WINDOW.slots) ledger.minute.delete(b)
  for (const b of ledger.day.keys()) if (b <= Math.floor(t / DAY_BUCKET_MS) - DAY_WINDOW.slots) ledger.day.delete(b)
  if (ledger.month.size > 0) for (const m of ledger.month.keys()) if (m < calendarMonth(t).index) ledger.month.delete(m)
}

/** The ledger as adjustments: each window's buckets on their own. */
export function ledgerAdjustments (a: Account): Adjustment[] {
  const { minute, day, month } = a.ledger
  return [...[...minute].map(([b, delta]) => ({ minute: b, day: 0, month: 0, delta })),
    ...[...day].map(([b, delta]) => ({ minute: 0, day: b, month: 0, delta })),
    ...[...month].map(([b, delta]) => ({ minute: 0, day: 0, month: b, delta }))]
}

/** `list` with `adj` added (merged with an entry of the same buckets), entries at 0 or below dropped. */
export function addAdjustment (list: readonly Adjustment[], adj: Adjustment): Adjustment[] {
  const same = (x: Adjustment): boolean => x.minute === adj.minute && x.day === adj.day && x.month === adj.month
  const merged = list.some(same) ? list.map((x) => same(x) ? { ...x, delta: x.delta + adj.delta } : x) : [...list, adj]
  return merged.filter((x) => x.delta > 0)
}

export function unwrittenUnits (a: Account): number {
  return a.unwritten.reduce((n, u) => n + u.delta, 0)
}

/** Units admitted in an outage not yet counted in Redis: from the reserve and from the allowance. */
export function uncountedUnits (a: Account): number {
  return unwrittenUnits(a) + a.allowanceUnwritten.reduce((n, u) => n + u.delta, 0)
}

/** The adjustment of an outage admission of `cost` at Redis time `latest` (its latest bound: never earlier than real). */
function outageAdjustment (a: Account, latest: number, cost: number, allowance: boolean): Adjustment {
  return { minute: Math.floor(latest / MINUTE_BUCKET_MS), day: Math.floor(latest / DAY_BUCKET_MS), month: a.monthLimit > 0 ? calendarMonth(latest).index : 0, delta: cost, ...(allowance ? { allowance } : {}) }
}

/**
 * What the outage allowance still lets this process admit for `a` at local `x`: `units` per rolling minute
 * and uncounted at once, none for a consumer whose room last seen here was within the allowance of all
 * processes (`total`) of its limit or would not last ALLOWANCE_SLACK_MS at its rate (it races its limit),
 * nor for one never answered here arriving at ALLOWANCE_UNSEEN_RATE or more.
 */
export function allowanceLeft (a: Account, x: number, units: number, total: number): number {
  if (units <= 0) return 0
  // Never seen here: its room is unknown (at most its limits), and a burst is taken for a racing consumer.
  const r = rate(a, x)
  const room = a.view === undefined ? Math.min(a.limits.perMinute, a.limits.perDay) : roomSeen(a)
  if (room < total || room < r * ALLOWANCE_SLACK_MS / 1000 || (a.view === undefined && r >= ALLOWANCE_UNSEEN_RATE)) return 0
  a.allowanceSpent = a.allowanceSpent.filter((s) => s.at > x - ALLOWANCE_WINDOW_MS)
  const spent = a.allowanceSpent.reduce((n, s) => n + s.cost, 0)
  const uncounted = a.allowanceUnwritten.reduce((n, u) => n + u.delta, 0)
  return Math.max(0, units - Math.max(spent, uncounted))
}

/** Admits `cost` from the outage allowance (see allowanceLeft); written back at the latest Redis time. */
export function spendAllowance (a: Account, clock: ShardClock, x: number, cost: number, units: number, total: number): boolean {
  const latest = clock.latest(x)
  if (latest === undefined || allowanceLeft(a, x, units, total) < cost) return false
  const adj = outageAdjustment(a, latest, cost, true)
  a.allowanceUnwritten = addAdjustment(a.allowanceUnwritten, adj)
  a.allowanceSpent.push({ at: x, cost })
  record(a, adj.minute, adj.day, adj.month, cost)
  return true
}

/** Spends `cost` of the reserve if Redis keeps it long enough after; written back at the latest Redis time. */
export function spendReserve (a: Account, clock: ShardClock, x: number, cost: number): boolean {
  const latest = clock.latest(x)
  if (latest === undefined || latest > a.reserveUntil - RESERVE_COVER_MS) return false
  if (unwrittenUnits(a) + cost > (a.reserveCap ?? a.reserve)) return false
  const adj = outageAdjustment(a, latest, cost, false)
  a.unwritten = addAdjustment(a.unwritten, adj)
  record(a, adj.minute, adj.day, adj.month, cost)
  return true
}

/** Spends `cost` from a live pool (recorded in the pool's buckets). */
export function spendPool (a: Account, cost: number): void {
  a.pool -= cost
  record(a, a.bucket, a.dayBucket, a.month, cost)
}

/** The room the last reply left to this process: the least limit less counted units and others' reserves. */
export function roomSeen (a: Account): number {
  const v = a.view
  if (v === undefined) return 0
  const used = (w: { used: number }): number => w.used + v.held - v.reserve
  let room = Math.min(a.limits.perMinute - used(v.minute), a.limits.perDay - used(v.day))
  if (a.monthLimit > 0 && !a.monthSoft) room = Math.min(room, a.monthLimit - used(v.month))
  return Math.max(0, room)
}

/** One grant entry of `a`: its limits and ban policy, with what this call asks and settles. */
export function entryOf (a: Account, requests: number, cost: number, extra: number, reserve: number, adjustments: GrantEntry['adjustments'], write = true): GrantEntry {
  return { key: a.key, minuteLimit: a.limits.perMinute, dayLimit: a.limits.perDay, monthLimit: a.monthLimit, monthSoft: a.monthSoft, requests, cost, extra, reserve, write, ban: a.ban, adjustments, blocksBucket: a.bucket, blocks: a.granted }
}

// The answers in the store contract's shape: what the last reply said of the windows, less the units this process
// holds unspent, so headers count down request by request between calls; a rejection shows the units counted with
// what is kept back (why there was no room).
function window (w: WindowReply | undefined, pool: number, kept: number, rejected: boolean, now: number, length: number): WindowState {
  if (w === undefined) return { count: 0, resetAt: now + length, retryAt: 0 }
  return { count: Math.max(0, rejected ? w.used + kept : w.used - pool), resetAt: w.resetAt, retryAt: rejected ? w.retryAt : 0 }
}

/**
 * `outcome` 'peek': read from `reply` (a read call), as a decision would find the windows now. `outageLeft`: what
 * this process may still admit while its shard does not answer (the minute's remaining shows no more).
 */
export function consumeResult (a: Account, outcome: ConsumeOutcome | 'peek', now: number, via: 'store' | 'grant' | 'fallback', bannedUntil = 0, reply?: GrantReply, outageLeft?: number, outageSource?: 'reserve' | 'allowance'): ConsumeResult {
  const view = reply ?? a.view
  // Units counted and not spent yet are not used; reserve admissions not yet counted are.
  const pool = reply === undefined ? a.pool - uncountedUnits(a) : 0
  const kept = view?.held ?? 0
  let decided: ConsumeOutcome = outcome === 'peek' ? 'ok' : outcome
  if (outcome === 'peek' && view !== undefined) {
    const full = view.minute.used + kept >= a.limits.perMinute || view.day.used + kept >= a.limits.perDay || (a.monthLimit > 0 && !a.monthSoft && view.month.used + kept >= a.monthLimit)
    decided = bannedUntil > now ? 'key_banned' : full ? 'rate_limited' : 'ok'
  }
  const rejected = decided === 'rate_limited'
  const minuteState = window(view?.minute, pool, kept, rejected, now, 60 * MINUTE_BUCKET_MS)
  return {
    outcome: decided,
    now,
    minute: outageLeft === undefined ? minuteState : { ...minuteState, count: Math.max(minuteState.count, a.limits.perMinute - outageLeft) },
    day: window(view?.day, pool, kept, rejected, now, 96 * DAY_BUCKET_MS),
    month: a.monthLimit > 0 ? window(view?.month, pool, kept, rejected, now, 0) : undefined,
    bannedUntil: decided === 'key_banned' || decided === 'ban_started' ? bannedUntil : 0,
    via: via === 'store' ? undefined : via,
    ...(outageSource === undefined ? {} : { outageSource })
  }
}
