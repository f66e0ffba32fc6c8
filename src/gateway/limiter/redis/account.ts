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

/**
 * A request waiting for a grant call; `attempts`: calls whose units came too late to spend for it; `blockWaits`: times it
 * was refused while blocks were held elsewhere and waited for their give-back.
 */
export interface Waiting { readonly cost: number, readonly resolve: (result: ConsumeResult) => void, readonly reject: (err: Error) => void, attempts: number, blockWaits: number }

export class Account {
  limits: Limits = { perMinute: 0, perDay: 0 }
  /** 0: no month limit; a soft month is counted but never refuses (Ask.overage). */
  monthLimit = 0
  monthSoft = true
  ban: BanPolicy | null = null
  /** The pool and its buckets (minute, day, month) by Redis's clock; blocks granted in its minute bucket, 0 once given back. */
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

  readonly id: string
  readonly key: string
  readonly shard: string

  constructor (id: string, key: string, shard: string) {
    this.id = id
    this.key = key
    this.shard = shard
  }
}

/** Counts one request (for sizing): requests per second, from this local second and the last. */
export function countRequest (account: Account, localNow: number): void {
  const second = Math.floor(localNow / 1000)
  if (second !== account.second) {
    account.seenBefore = second === account.second + 1 ? account.seen : 0
    account.seen = 0
    account.second = second
  }
  account.seen++
  account.lastSeen = localNow
}

export function rate (account: Account, localNow: number): number {
  return Math.floor(localNow / 1000) === account.second ? account.seen + account.seenBefore * (1 - (localNow % 1000) / 1000) : 0
}

/** True while the pool's bucket is not over by the latest Redis time at local `localNow`. */
export function poolLive (account: Account, clock: ShardClock, localNow: number): boolean {
  const latest = clock.latest(localNow)
  return account.pool > 0 && latest !== undefined && latest < (account.bucket + 1) * MINUTE_BUCKET_MS - SPEND_MARGIN_MS
}

/** The pool goes back: what is left of it is given back, and no block of its bucket is held any more (the next call says so). */
function givePoolBack (account: Account): void {
  if (account.pool > 0) account.returns.push({ minute: account.bucket, day: account.dayBucket, month: account.month, delta: -account.pool })
  account.pool = 0
  account.granted = 0
}

/** A pool whose bucket is over becomes a give-back (it will never be spent); true if none is live. */
export function expirePool (account: Account, clock: ShardClock, localNow: number): boolean {
  if (poolLive(account, clock, localNow)) return false
  givePoolBack(account)
  return true
}

/** Units just counted at Redis time `redisNow` join the pool (an older pool is given back), `block` of them a block. */
export function fillPool (account: Account, units: number, block: number, redisNow: number): void {
  const bucket = Math.floor(redisNow / MINUTE_BUCKET_MS)
  if (bucket !== account.bucket) givePoolBack(account)
  account.granted += block
  account.bucket = bucket
  account.dayBucket = Math.floor(redisNow / DAY_BUCKET_MS)
  account.month = account.monthLimit > 0 ? calendarMonth(redisNow).index : 0
  account.pool += units
}

/** Records an admission of `cost` units in its buckets, for a re-seed. */
function record (account: Account, minute: number, day: number, month: number, cost: number): void {
  const { ledger } = account
  ledger.minute.set(minute, (ledger.minute.get(minute) ?? 0) + cost)
  ledger.day.set(day, (ledger.day.get(day) ?? 0) + cost)
  if (month > 0) ledger.month.set(month, (ledger.month.get(month) ?? 0) + cost)
}

/** Drops from the ledger what left every window by Redis time `t` at the earliest (the sweep's, once a second). */
export function pruneLedger ({ ledger }: Account, redisTime: number): void {
  for (const bucket of ledger.minute.keys()) if (bucket <= Math.floor(redisTime / MINUTE_BUCKET_MS) - MINUTE_WINDOW.slots) ledger.minute.delete(bucket)
  for (const bucket of ledger.day.keys()) if (bucket <= Math.floor(redisTime / DAY_BUCKET_MS) - DAY_WINDOW.slots) ledger.day.delete(bucket)
  if (ledger.month.size > 0) for (const month of ledger.month.keys()) if (month < calendarMonth(redisTime).index) ledger.month.delete(month)
}

/** The ledger as adjustments: each window's buckets on their own. */
export function ledgerAdjustments (account: Account): Adjustment[] {
  const { minute, day, month } = account.ledger
  return [...[...minute].map(([bucket, delta]) => ({ minute: bucket, day: 0, month: 0, delta })),
    ...[...day].map(([bucket, delta]) => ({ minute: 0, day: bucket, month: 0, delta })),
    ...[...month].map(([bucket, delta]) => ({ minute: 0, day: 0, month: bucket, delta }))]
}

/** `list` with `adj` added (merged with an entry of the same buckets), entries at 0 or below dropped. */
export function addAdjustment (list: readonly Adjustment[], adj: Adjustment): Adjustment[] {
  const same = (entry: Adjustment): boolean => entry.minute === adj.minute && entry.day === adj.day && entry.month === adj.month
  const merged = list.some(same) ? list.map((entry) => same(entry) ? { ...entry, delta: entry.delta + adj.delta } : entry) : [...list, adj]
  return merged.filter((entry) => entry.delta > 0)
}

export function unwrittenUnits (account: Account): number {
  return account.unwritten.reduce((sum, adjustment) => sum + adjustment.delta, 0)
}

/** Units admitted in an outage not yet counted in Redis: from the reserve and from the allowance. */
export function uncountedUnits (account: Account): number {
  return unwrittenUnits(account) + account.allowanceUnwritten.reduce((sum, adjustment) => sum + adjustment.delta, 0)
}

/** The adjustment of an outage admission of `cost` at Redis time `latest` (its latest bound: never earlier than real). */
function outageAdjustment (account: Account, latest: number, cost: number, allowance: boolean): Adjustment {
  return { minute: Math.floor(latest / MINUTE_BUCKET_MS), day: Math.floor(latest / DAY_BUCKET_MS), month: account.monthLimit > 0 ? calendarMonth(latest).index : 0, delta: cost, ...(allowance ? { allowance } : {}) }
}

/**
 * What the outage allowance still lets this process admit for `account` at local `localNow`: `units` per rolling minute
 * and uncounted at once, none for a consumer whose room last seen here was within the allowance of all
 * processes (`total`) of its limit or would not last ALLOWANCE_SLACK_MS at its rate (it races its limit),
 * nor for one never answered here arriving at ALLOWANCE_UNSEEN_RATE or more.
 */
export function allowanceLeft (account: Account, localNow: number, units: number, total: number): number {
  if (units <= 0) return 0
  // Never seen here: its room is unknown (at most its limits), and a burst is taken for a racing consumer.
  const perSecond = rate(account, localNow)
  const room = account.view === undefined ? Math.min(account.limits.perMinute, account.limits.perDay) : roomSeen(account)
  if (room < total || room < perSecond * ALLOWANCE_SLACK_MS / 1000 || (account.view === undefined && perSecond >= ALLOWANCE_UNSEEN_RATE)) return 0
  account.allowanceSpent = account.allowanceSpent.filter((spending) => spending.at > localNow - ALLOWANCE_WINDOW_MS)
  const spent = account.allowanceSpent.reduce((sum, spending) => sum + spending.cost, 0)
  const uncounted = account.allowanceUnwritten.reduce((sum, adjustment) => sum + adjustment.delta, 0)
  return Math.max(0, units - Math.max(spent, uncounted))
}

/** Admits `cost` from the outage allowance (see allowanceLeft); written back at the latest Redis time. */
export function spendAllowance (account: Account, clock: ShardClock, localNow: number, cost: number, units: number, total: number): boolean {
  const latest = clock.latest(localNow)
  if (latest === undefined || allowanceLeft(account, localNow, units, total) < cost) return false
  const adj = outageAdjustment(account, latest, cost, true)
  account.allowanceUnwritten = addAdjustment(account.allowanceUnwritten, adj)
  account.allowanceSpent.push({ at: localNow, cost })
  record(account, adj.minute, adj.day, adj.month, cost)
  return true
}

/** Spends `cost` of the reserve if Redis keeps it long enough after; written back at the latest Redis time. */
export function spendReserve (account: Account, clock: ShardClock, localNow: number, cost: number): boolean {
  const latest = clock.latest(localNow)
  if (latest === undefined || latest > account.reserveUntil - RESERVE_COVER_MS) return false
  if (unwrittenUnits(account) + cost > (account.reserveCap ?? account.reserve)) return false
  const adj = outageAdjustment(account, latest, cost, false)
  account.unwritten = addAdjustment(account.unwritten, adj)
  record(account, adj.minute, adj.day, adj.month, cost)
  return true
}

/** Spends `cost` from a live pool (recorded in the pool's buckets). */
export function spendPool (account: Account, cost: number): void {
  account.pool -= cost
  record(account, account.bucket, account.dayBucket, account.month, cost)
}

/** The room the last reply left to this process: the least limit less counted units and others' reserves. */
export function roomSeen (account: Account): number {
  const view = account.view
  if (view === undefined) return 0
  const used = (windowReply: { used: number }): number => windowReply.used + view.held - view.reserve
  let room = Math.min(account.limits.perMinute - used(view.minute), account.limits.perDay - used(view.day))
  if (account.monthLimit > 0 && !account.monthSoft) room = Math.min(room, account.monthLimit - used(view.month))
  return Math.max(0, room)
}

/** One grant entry of `account`: its limits and ban policy, with what this call asks and settles. */
export function entryOf (account: Account, requests: number, cost: number, extra: number, reserve: number, adjustments: GrantEntry['adjustments'], write = true): GrantEntry {
  return { key: account.key, minuteLimit: account.limits.perMinute, dayLimit: account.limits.perDay, monthLimit: account.monthLimit, monthSoft: account.monthSoft, requests, cost, extra, reserve, write, ban: account.ban, adjustments, blocksBucket: account.bucket, blocks: account.granted }
}

// The answers in the store contract's shape: what the last reply said of the windows, less the units this process
// holds unspent, so headers count down request by request between calls; a rejection shows the units counted with
// what is kept back (why there was no room).
function window (windowReply: WindowReply | undefined, pool: number, kept: number, rejected: boolean, now: number, length: number): WindowState {
  if (windowReply === undefined) return { count: 0, resetAt: now + length, retryAt: 0 }
  return { count: Math.max(0, rejected ? windowReply.used + kept : windowReply.used - pool), resetAt: windowReply.resetAt, retryAt: rejected ? windowReply.retryAt : 0 }
}

/**
 * `outcome` 'peek': read from `reply` (a read call), as a decision would find the windows now. `outageLeft`: what
 * this process may still admit while its shard does not answer (the minute's remaining shows no more).
 */
export function consumeResult (account: Account, outcome: ConsumeOutcome | 'peek', now: number, via: 'store' | 'grant' | 'fallback', bannedUntil = 0, reply?: GrantReply, outageLeft?: number, outageSource?: 'reserve' | 'allowance'): ConsumeResult {
  const view = reply ?? account.view
  // Units counted and not spent yet are not used; reserve admissions not yet counted are.
  const pool = reply === undefined ? account.pool - uncountedUnits(account) : 0
  const kept = view?.held ?? 0
  let decided: ConsumeOutcome = outcome === 'peek' ? 'ok' : outcome
  if (outcome === 'peek' && view !== undefined) {
    const full = view.minute.used + kept >= account.limits.perMinute || view.day.used + kept >= account.limits.perDay || (account.monthLimit > 0 && !account.monthSoft && view.month.used + kept >= account.monthLimit)
    decided = bannedUntil > now ? 'key_banned' : full ? 'rate_limited' : 'ok'
  }
  const rejected = decided === 'rate_limited'
  const minuteState = window(view?.minute, pool, kept, rejected, now, 60 * MINUTE_BUCKET_MS)
  return {
    outcome: decided,
    now,
    minute: outageLeft === undefined ? minuteState : { ...minuteState, count: Math.max(minuteState.count, account.limits.perMinute - outageLeft) },
    day: window(view?.day, pool, kept, rejected, now, 96 * DAY_BUCKET_MS),
    month: account.monthLimit > 0 ? window(view?.month, pool, kept, rejected, now, 0) : undefined,
    bannedUntil: decided === 'key_banned' || decided === 'ban_started' ? bannedUntil : 0,
    via: via === 'store' ? undefined : via,
    ...(outageSource === undefined ? {} : { outageSource })
  }
}
