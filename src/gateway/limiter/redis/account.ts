// What one process holds for one limiter id on the Redis path, and the arithmetic on it:
// - the pool: units Redis has counted for this process in one minute bucket, spent here until that
//   bucket ends by the shard's clock (clock.ts) — never later, so each admission lies in the bucket
//   it was counted in; what is left then is given back;
// - the reserve: units Redis keeps back from everyone else for this process, spent only while the
//   shard does not answer, and only while Redis keeps them back for at least a minute after;
//   its admissions are written back when the shard answers again;
// - the ledger: what this process admitted in each bucket still in a window, re-seeded into a
//   shard that lost its data (shard.ts);
// - the requests waiting for a call, and the rate that sizes the next one.
import type { BanPolicy, Limits } from '../../config/types.js'
import type { ConsumeResult } from '../store.js'
import type { ShardClock } from './clock.js'
import type { Adjustment, GrantReply } from './scripts.js'

export const MINUTE_BUCKET_MS = 1_000
export const DAY_BUCKET_MS = 900_000
const MINUTE_SLOTS = 61
const DAY_SLOTS = 97
/** How long Redis keeps a reserve after the call that set it (grant.lua's RESERVE_TTL_MS). */
export const RESERVE_TTL_MS = 120_000
/** A reserve admission needs Redis to keep the reserve this long after it: the minute window and a margin. */
export const RESERVE_COVER_MS = 62_000
/** A grant is spent only this far inside its bucket (a TIME read in whole ms, timer granularity). */
export const SPEND_MARGIN_MS = 2

/** A request waiting for a grant call. */
export interface Waiting {
  readonly cost: number
  readonly resolve: (result: ConsumeResult) => void
  readonly reject: (err: Error) => void
  /** Calls whose units came too late to be spent for it. */
  attempts: number
}

export interface Account {
  readonly id: string
  readonly key: string
  readonly shard: string
  limits: Limits
  monthLimit: number
  /** The month is counted but never refuses (Ask.overage). */
  monthSoft: boolean
  ban: BanPolicy | null
  pool: number
  /** The pool's buckets (minute, day, month) by Redis's clock. */
  bucket: number
  dayBucket: number
  month: number
  waiting: Waiting[]
  /** A write call of this account is queued or in flight. */
  calling: boolean
  /** The last reply (headers), its Redis time and the local instant it was read. */
  view: GrantReply | undefined
  viewAt: number
  viewLocal: number
  /** Requests seen this local second and the one before. */
  second: number
  seen: number
  seenBefore: number
  lastSeen: number
  /**
   * The reserve Redis confirmed and until when (Redis ms) it keeps it back; while a write call is
   * in flight, the most reserve admissions may come to, whether or not Redis applies it.
   */
  reserve: number
  reserveUntil: number
  reserveCap: number | undefined
  /** Reserve admissions not yet counted in Redis, and give-backs to send. */
  unwritten: Adjustment[]
  returns: Adjustment[]
  ledger: { minute: Map<number, number>, day: Map<number, number>, month: Map<number, number> }
}

export function newAccount (id: string, key: string, shard: string): Account {
  return {
    id, key, shard, limits: { perMinute: 0, perDay: 0 }, monthLimit: 0, monthSoft: true, ban: null,
    pool: 0, bucket: -1, dayBucket: 0, month: 0, waiting: [], calling: false,
    view: undefined, viewAt: 0, viewLocal: 0, second: 0, seen: 0, seenBefore: 0, lastSeen: 0,
    reserve: 0, reserveUntil: 0, reserveCap: undefined, unwritten: [], returns: [],
    ledger: { minute: new Map(), day: new Map(), month: new Map() }
  }
}

/** Calendar month (UTC) of Unix ms, as year × 12 + month − 1 (grant.lua's month_of). */
export function monthOf (ms: number): number {
  const d = new Date(ms)
  return d.getUTCFullYear() * 12 + d.getUTCMonth()
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
  const fraction = (x % 1000) / 1000
  return Math.floor(x / 1000) === a.second ? a.seen + a.seenBefore * (1 - fraction) : 0
}

/** True while the pool's bucket is not over by the latest Redis time at local `x`. */
export function poolLive (a: Account, clock: ShardClock, x: number): boolean {
  if (a.pool <= 0) return false
  const latest = clock.latest(x)
  return latest !== undefined && latest < (a.bucket + 1) * MINUTE_BUCKET_MS - SPEND_MARGIN_MS
}

/** A pool whose bucket is over becomes a give-back (it will never be spent). */
export function expirePool (a: Account, clock: ShardClock, x: number): void {
  if (a.pool > 0 && !poolLive(a, clock, x)) {
    a.returns.push({ minute: a.bucket, day: a.dayBucket, month: a.month, delta: -a.pool })
    a.pool = 0
  }
}

/** Units just counted at Redis time `redisNow` join the pool (an older pool is given back). */
export function fillPool (a: Account, units: number, redisNow: number): void {
  const bucket = Math.floor(redisNow / MINUTE_BUCKET_MS)
  if (bucket !== a.bucket && a.pool > 0) a.returns.push({ minute: a.bucket, day: a.dayBucket, month: a.month, delta: -a.pool })
  if (bucket !== a.bucket) a.pool = 0
  a.bucket = bucket
  a.dayBucket = Math.floor(redisNow / DAY_BUCKET_MS)
  a.month = a.monthLimit > 0 ? monthOf(redisNow) : 0
  a.pool += units
}

/** Records an admission of `cost` units in buckets for a re-seed, dropping what left every window. */
export function record (a: Account, minute: number, day: number, month: number, cost: number): void {
  const { ledger } = a
  ledger.minute.set(minute, (ledger.minute.get(minute) ?? 0) + cost)
  ledger.day.set(day, (ledger.day.get(day) ?? 0) + cost)
  if (month > 0) ledger.month.set(month, (ledger.month.get(month) ?? 0) + cost)
  for (const b of ledger.minute.keys()) if (b <= minute - MINUTE_SLOTS) ledger.minute.delete(b)
  if (ledger.day.size > 1) for (const b of ledger.day.keys()) if (b <= day - DAY_SLOTS) ledger.day.delete(b)
  if (ledger.month.size > 1) for (const m of ledger.month.keys()) if (m < month) ledger.month.delete(m)
}

/** The ledger as adjustments: each window's buckets on their own. */
export function ledgerAdjustments (a: Account): Adjustment[] {
  const out: Adjustment[] = []
  for (const [minute, delta] of a.ledger.minute) out.push({ minute, day: 0, month: 0, delta })
  for (const [day, delta] of a.ledger.day) out.push({ minute: 0, day, month: 0, delta })
  for (const [month, delta] of a.ledger.month) out.push({ minute: 0, day: 0, month, delta })
  return out
}

/** Adds `adj` to the list, merged with an entry of the same buckets. */
export function addAdjustment (list: Adjustment[], adj: Adjustment): void {
  const i = list.findIndex((x) => x.minute === adj.minute && x.day === adj.day && x.month === adj.month)
  if (i < 0) list.push(adj)
  else list[i] = { ...list[i]!, delta: list[i]!.delta + adj.delta }
}

/** Takes `sent` (now counted in Redis) out of `list`. */
export function subtractAdjustments (list: Adjustment[], sent: readonly Adjustment[]): Adjustment[] {
  const out = list.slice()
  for (const s of sent) addAdjustment(out, { ...s, delta: -s.delta })
  return out.filter((x) => x.delta > 0)
}

export function unwrittenUnits (a: Account): number {
  let n = 0
  for (const u of a.unwritten) n += u.delta
  return n
}

/**
 * Spends `cost` of the reserve at local `x` if Redis keeps it back long enough after and enough is
 * left; the admission is written back (and recorded) in the buckets of the latest Redis time.
 */
export function spendReserve (a: Account, clock: ShardClock, x: number, cost: number): boolean {
  const latest = clock.latest(x)
  if (latest === undefined || latest > a.reserveUntil - RESERVE_COVER_MS) return false
  if (unwrittenUnits(a) + cost > (a.reserveCap ?? a.reserve)) return false
  const minute = Math.floor(latest / MINUTE_BUCKET_MS)
  const day = Math.floor(latest / DAY_BUCKET_MS)
  const month = a.monthLimit > 0 ? monthOf(latest) : 0
  addAdjustment(a.unwritten, { minute, day, month, delta: cost })
  record(a, minute, day, month, cost)
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
