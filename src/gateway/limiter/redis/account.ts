// What one process holds for one limiter id on the Redis path, and the arithmetic on it. The parts own their
// invariants: the pool (pool.ts: units counted for this process in one minute bucket, spent until that bucket ends,
// then given back), the reserve (reserve.ts: units Redis keeps back for this process, spent only while the shard does
// not answer, written back after), the outage allowance spent (allowance.ts: admitted uncounted while the shard does
// not answer, at most a stated share of the limit, written back after) and the ledger (ledger.ts: what it admitted per
// bucket still in a window, re-seeded into a shard that lost its data). The account itself keeps what is per id: the
// limits asked with, the requests waiting for a call and whether one is under way, the last reply, the request rate;
// and the answers built from them. Nothing outside this file writes an account's state but through these methods.
import type { BanPolicy, Limits } from '../../config/types.js'
import { calendarMonth, DAY_BUCKET_MS, MINUTE_BUCKET_MS } from '../arithmetic.js'
import type { Ask, ConsumeOutcome, ConsumeResult, WindowState } from '../store.js'
import { AllowanceSpent } from './allowance.js'
import type { ShardClock } from './clock.js'
import { Ledger } from './ledger.js'
import { Pool } from './pool.js'
import { Reserve } from './reserve.js'
import type { Adjustment, GrantEntry, GrantReply, WindowReply } from './scripts.js'

/** No allowance for a consumer whose room, last seen, would not last this long at its rate (it races its limit). */
export const ALLOWANCE_SLACK_MS = 60_000
/** No allowance for a consumer never answered here by Redis that arrives this often per second (a burst, maybe racing its limit). */
export const ALLOWANCE_UNSEEN_RATE = 5

/**
 * A request waiting for a grant call; `attempts`: calls whose units came too late to spend for it; `refusedIn`: the minute
 * bucket (Redis's clock) of its first refusal while blocks were held elsewhere (it waits for them: calls.ts waitsForBlocks),
 * or of the reply that admitted it too late to spend: it asks again since then, and a ban begun meanwhile does not
 * answer it (grant.lua `waited`); `parkedAt`: the local instant the outage policy first could not admit it (it waits for
 * its shard to answer again from then, a bounded time: calls.ts refuse); `resumed`: it was resumed once when its shard
 * answered again, its `parkedAt` cleared (a call of it given up then waits once more, never again: calls.ts shardUp).
 */
export interface Waiting { readonly cost: number, readonly resolve: (result: ConsumeResult) => void, readonly reject: (err: Error) => void, attempts: number, refusedIn?: number, parkedAt?: number, resumed?: boolean }

/** What an account is asked with: its limits and ban policy (the rest of an Ask is per request). */
export type AccountTerms = Pick<Ask, 'limits' | 'ban' | 'monthLimit' | 'overage'>

export class Account {
  readonly pool = new Pool()
  readonly reserve = new Reserve()
  readonly allowance = new AllowanceSpent()
  readonly ledger = new Ledger()
  #limits: Limits = { perMinute: 0, perDay: 0 }
  #monthLimit = 0
  #monthSoft = true
  #ban: BanPolicy | null = null
  #waiting: Waiting[] = []
  #calling = false
  #view: GrantReply | undefined = undefined
  #viewAt = 0
  #viewLocal = 0
  #second = 0
  #seen = 0
  #seenBefore = 0
  #lastSeen = 0

  readonly id: string
  readonly key: string
  readonly shard: string

  constructor (id: string, key: string, shard: string) {
    this.id = id
    this.key = key
    this.shard = shard
  }

  get limits (): Limits { return this.#limits }
  /** 0: no month limit; a soft month is counted but never refuses (Ask.overage). */
  get monthLimit (): number { return this.#monthLimit }
  get monthSoft (): boolean { return this.#monthSoft }
  get ban (): BanPolicy | null { return this.#ban }

  /** The limits and ban policy of the latest request (a plan may change between requests). */
  configure (terms: AccountTerms): this {
    this.#limits = terms.limits
    this.#ban = terms.ban
    this.#monthLimit = terms.monthLimit
    this.#monthSoft = terms.overage
    return this
  }

  /** The last reply (headers), if any. */
  get view (): GrantReply | undefined { return this.#view }
  /** A reply read at Redis time `redisNow`, local `received`. */
  heard (reply: GrantReply, redisNow: number, received: number): void {
    this.#view = reply
    this.#viewAt = redisNow
    this.#viewLocal = received
  }

  /** Redis's time at local `localNow`, counted on from the last reply. */
  redisTimeAt (localNow: number): number {
    return this.#viewAt + (localNow - this.#viewLocal)
  }

  /** A write call of this account is queued or in flight (or a retry of its waiting requests is timed). */
  get calling (): boolean { return this.#calling }
  callStarted (): void { this.#calling = true }
  callEnded (): void { this.#calling = false }

  get waitingCount (): number { return this.#waiting.length }
  wait (request: Waiting): void { this.#waiting.push(request) }
  /** Every request waiting, in order; none waits after. */
  takeWaiting (): Waiting[] { return this.#waiting.splice(0) }
  /** Requests to ask again, ahead of those that came meanwhile. */
  requeue (requests: readonly Waiting[]): void { this.#waiting.unshift(...requests) }

  /** The first waiting request, if the live pool pays for it (spent, recorded and no longer waiting). */
  servedFromPool (clock: ShardClock, localNow: number): Waiting | undefined {
    const first = this.#waiting[0]
    if (first === undefined || !this.spendPool(first.cost, clock, localNow)) return undefined
    return this.#waiting.shift()
  }

  /** Spends `cost` from a live pool, recorded in the pool's buckets; false if the pool is lapsed or short. */
  spendPool (cost: number, clock: ShardClock, localNow: number): boolean {
    if (!this.pool.spend(cost, clock, localNow)) return false
    this.ledger.record(this.pool.bucket, this.pool.dayBucket, this.pool.month, cost)
    return true
  }

  /** Units just counted at Redis time `redisNow` join the pool, `block` of them a block. */
  fillPool (units: number, block: number, redisNow: number): void {
    this.pool.fill(units, block, redisNow, this.#monthLimit > 0)
  }

  /** Counts one request (for sizing): requests per second, from this local second and the last. */
  countRequest (localNow: number): void {
    const second = Math.floor(localNow / 1000)
    if (second !== this.#second) {
      this.#seenBefore = second === this.#second + 1 ? this.#seen : 0
      this.#seen = 0
      this.#second = second
    }
    this.#seen++
    this.#lastSeen = localNow
  }

  /** Requests per second at local `localNow`: this second's, and the last one's pro rata. */
  rate (localNow: number): number {
    return Math.floor(localNow / 1000) === this.#second ? this.#seen + this.#seenBefore * (1 - (localNow % 1000) / 1000) : 0
  }

  /** The local second of the last request, the requests seen in the second before it, and the last one's instant. */
  get second (): number { return this.#second }
  get seenBefore (): number { return this.#seenBefore }
  get lastSeen (): number { return this.#lastSeen }
}

/** Units admitted in an outage not yet counted in Redis: from the reserve and from the allowance. */
export function uncountedUnits (account: Account): number {
  return account.reserve.unwrittenUnits() + account.allowance.unwrittenUnits()
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
  const perSecond = account.rate(localNow)
  const room = account.view === undefined ? Math.min(account.limits.perMinute, account.limits.perDay) : roomSeen(account)
  if (room < total || room < perSecond * ALLOWANCE_SLACK_MS / 1000 || (account.view === undefined && perSecond >= ALLOWANCE_UNSEEN_RATE)) return 0
  return account.allowance.left(localNow, units)
}

/** Admits `cost` from the outage allowance (see allowanceLeft); written back at the latest Redis time. */
export function spendAllowance (account: Account, clock: ShardClock, localNow: number, cost: number, units: number, total: number): boolean {
  const latest = clock.latest(localNow)
  if (latest === undefined || allowanceLeft(account, localNow, units, total) < cost) return false
  const adj = outageAdjustment(account, latest, cost, true)
  if (!account.allowance.spend(localNow, units, adj)) return false
  account.ledger.record(adj.minute, adj.day, adj.month, cost)
  return true
}

/** Spends `cost` of the reserve if Redis keeps it long enough after; written back at the latest Redis time. */
export function spendReserve (account: Account, clock: ShardClock, localNow: number, cost: number): boolean {
  const latest = clock.latest(localNow)
  if (latest === undefined) return false
  const adj = outageAdjustment(account, latest, cost, false)
  if (!account.reserve.spend(latest, adj)) return false
  account.ledger.record(adj.minute, adj.day, adj.month, cost)
  return true
}

/** The room the last reply left to this process: the least limit less counted units and others' reserves. */
export function roomSeen (account: Account): number {
  const view = account.view
  if (view === undefined) return 0
  let room = Math.min(account.limits.perMinute - usedSeen(view, view.minute), account.limits.perDay - usedSeen(view, view.day))
  if (account.monthLimit > 0 && !account.monthSoft) room = Math.min(room, account.monthLimit - usedSeen(view, view.month))
  return Math.max(0, room)
}

/**
 * A window's units counted, as the room of this process sees them (its own blocks held, not others' reserves). A
 * function of the module, not a closure made per call (under tsx, how the sources ran until 29 Nov, each such closure
 * also paid keepNames' Object.defineProperty).
 */
function usedSeen (view: GrantReply, windowReply: WindowReply): number {
  return windowReply.used + view.held - view.reserve
}

/** One grant entry of `account`: its limits and ban policy, with what this call asks and settles. */
export function entryOf (account: Account, requests: number, cost: number, extra: number, reserve: number, adjustments: GrantEntry['adjustments'], write = true, waited = 0): GrantEntry {
  return { key: account.key, minuteLimit: account.limits.perMinute, dayLimit: account.limits.perDay, monthLimit: account.monthLimit, monthSoft: account.monthSoft, requests, cost, extra, reserve, write, ban: account.ban, adjustments, blocksBucket: account.pool.bucket, blocks: account.pool.granted, waited }
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
  // Units counted and not spent yet are not used; reserve admissions not yet counted are.
  const pool = reply === undefined ? account.pool.units - uncountedUnits(account) : 0
  return resultOf(account, reply ?? account.view, pool, outcome, now, via, bannedUntil, outageLeft, outageSource)
}

/** The answer when nothing is known of the windows (STORE_ON_ERROR=open): admitted, with the whole limits left. */
export function unknownResult (account: Account, now: number): ConsumeResult {
  return resultOf(account, undefined, 0, 'ok', now, 'fallback')
}

function resultOf (account: Account, view: GrantReply | undefined, pool: number, outcome: ConsumeOutcome | 'peek', now: number, via: 'store' | 'grant' | 'fallback', bannedUntil = 0, outageLeft?: number, outageSource?: 'reserve' | 'allowance'): ConsumeResult {
  const kept = view?.held ?? 0
  let decided: ConsumeOutcome = outcome === 'peek' ? 'ok' : outcome
  if (outcome === 'peek' && view !== undefined) {
    const full = view.minute.used + kept >= account.limits.perMinute || view.day.used + kept >= account.limits.perDay || (account.monthLimit > 0 && !account.monthSoft && view.month.used + kept >= account.monthLimit)
    decided = bannedUntil > now ? 'key_banned' : full ? 'rate_limited' : 'ok'
  }
  const rejected = decided === 'rate_limited'
  const minuteState = window(view?.minute, pool, kept, rejected, now, 60 * MINUTE_BUCKET_MS)
  const result: { -readonly [K in keyof ConsumeResult]: ConsumeResult[K] } = {
    outcome: decided,
    now,
    minute: outageLeft === undefined ? minuteState : { ...minuteState, count: Math.max(minuteState.count, account.limits.perMinute - outageLeft) },
    day: window(view?.day, pool, kept, rejected, now, 96 * DAY_BUCKET_MS),
    month: account.monthLimit > 0 ? window(view?.month, pool, kept, rejected, now, 0) : undefined,
    bannedUntil: decided === 'key_banned' || decided === 'ban_started' ? bannedUntil : 0,
    via: via === 'store' ? undefined : via
  }
  // Only an outage admission says where it came from (no empty object spread into every other answer).
  if (outageSource !== undefined) result.outageSource = outageSource
  return result
}
