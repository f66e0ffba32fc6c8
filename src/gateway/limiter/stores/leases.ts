// Leases: a hot consumer's requests admitted in this process without a Redis round trip, and still
// never one admission more than the limit allows. A process that sees a consumer often
// (DEFAULT_LEASE_MIN_RATE requests in the last second, consumer-rate.ts) asks lease.lua for a block
// of admissions instead of one: the block is counted in Redis at once, in the current buckets, and
// this process spends it (lease-table.ts) until that minute bucket ends *by Redis time*: deadline =
// local send time + (bucket end − Redis now) − margin. The script ran after the send, so every local
// admission lands in the bucket it was counted in, as if each request had been counted on its own
// (docs/limiter-internals.md has the whole argument, the sizing and the crash bound). What is not
// spent is handed back to those same buckets with the next lease or by a sweep once it has ended.
// A request that finds no room in its lease goes to the normal consume call, which counts 429s and
// bans as before; a lift or reset anywhere ends this process's lease at once (watchBanLifts). The
// resilient store wraps this one and answers `take` first, before any timer or breaker.
import { randomBytes } from 'node:crypto'
import type { BanPolicy, Limits } from '../../config/types.js'
import { DAY_WINDOW, MINUTE_WINDOW } from '../arithmetic.js'
import type { ConsumeResult } from '../store.js'
import { createConsumerRate } from './consumer-rate.js'
import { createLeaseTable, type Unused } from './lease-table.js'
import type { RemoteStore } from './resilient.js'

/** Requests per second (as seen by this process) from which a consumer gets leases. */
export const DEFAULT_LEASE_MIN_RATE = 20
/** Deadline margin for clock-rate drift and timer granularity, in ms. */
export const DEFAULT_LEASE_MARGIN_MS = 10
/** How often ended leases that no request renewed are handed back. */
export const DEFAULT_LEASE_SWEEP_MS = 1_000
/** A block never exceeds the observed rate by more than this factor (bursts within the second). */
const RATE_HEADROOM = 1.5
const MINUTE_BUCKET_MS = MINUTE_WINDOW.bucketMs

/** A block of admissions counted in Redis at once; the lease table spends it locally. */
export interface Grant {
  /** The decision for the request that asked (counts include the whole block). */
  readonly result: ConsumeResult
  /** Admissions counted, this request's included (0 when not admitted). */
  readonly granted: number
}

/** What the lease table needs from the store below it: the Redis store's. */
export interface LeasingStore extends RemoteStore {
  /** Like `consume`, counting up to `want` admissions (this request's included) when there is room, after handing back `unused`. */
  lease: (id: string, limits: Limits, ban: BanPolicy | null, want: number, holder: string, unused: Unused | undefined) => Promise<Grant>
  /** Returns an ended lease's unused admissions to the buckets they were counted in. */
  giveBack: (id: string, unused: Unused) => Promise<void>
}

export interface LeaseOptions {
  minRate?: number
  marginMs?: number
  sweepMs?: number
  /** This process's holder id in the script's fair-share bookkeeping (default: random). */
  holder?: string
  /** Unix ms: the gateway clock (rates per second, block sizing). */
  now?: () => number
  /** Monotonic ms for deadlines (default performance.now): a wall clock stepping back must not stretch a lease. */
  monotonic?: () => number
}

export interface LeasedStore extends RemoteStore {
  /**
   * One admission from a live lease, as the script would have answered it, or undefined: ask
   * `consume`. No Redis call, so the resilient store answers it before its timer and breaker.
   */
  take: (id: string, limits: Limits) => ConsumeResult | undefined
  /** Leases alive now (tests, metrics). */
  leases: () => number
}

function roomOf (result: ConsumeResult, limits: Limits): number {
  return Math.min(limits.perMinute - result.minute.count, limits.perDay - result.day.count)
}

export function createLeasedStore (inner: LeasingStore, opts: LeaseOptions = {}): LeasedStore {
  const minRate = opts.minRate ?? DEFAULT_LEASE_MIN_RATE
  const marginMs = opts.marginMs ?? DEFAULT_LEASE_MARGIN_MS
  const holder = opts.holder ?? randomBytes(6).toString('base64url')
  const now = opts.now ?? Date.now
  const monotonic = opts.monotonic ?? (() => performance.now())
  const table = createLeaseTable(monotonic)
  const rates = createConsumerRate(now)
  /**
   * Leases being asked for. Other requests of the consumer do not wait for one (that would put two
   * round trips inside one store timeout budget): they are decided in Redis one by one meanwhile.
   */
  const pending = new Set<string>()

  function giveBack (returns: Array<[string, Unused]>): Promise<unknown> {
    // Counted already: a lost return only under-admits.
    return Promise.all(returns.map(async ([id, unused]) => await inner.giveBack(id, unused).catch(() => undefined)))
  }

  async function leaseFor (id: string, limits: Limits, ban: BanPolicy | null, rate: number): Promise<ConsumeResult> {
    // The lease this one replaces (ended, spent, or for limits a reload changed) hands back with it.
    const unused = table.retire(id)
    const msLeft = MINUTE_BUCKET_MS - (now() % MINUTE_BUCKET_MS)
    const want = Math.max(2, Math.ceil(rate * RATE_HEADROOM * msLeft / 1000))
    const sentAt = monotonic()
    const { result, granted } = await inner.lease(id, limits, ban, want, holder, unused)
    rates.noteRoom(id, roomOf(result, limits))
    if (granted === 0) return result
    const bucketEnd = (Math.floor(result.now / MINUTE_BUCKET_MS) + 1) * MINUTE_BUCKET_MS
    table.hold(id, {
      limits,
      minuteBucket: Math.floor(result.now / MINUTE_BUCKET_MS),
      dayBucket: Math.floor(result.now / DAY_WINDOW.bucketMs),
      granted,
      used: 1,
      deadline: sentAt + (bucketEnd - result.now) - marginMs,
      sentAt,
      result
    })
    const unspent = granted - 1
    return { ...result, minute: { ...result.minute, count: result.minute.count - unspent }, day: { ...result.day, count: result.day.count - unspent } }
  }

  function take (id: string, limits: Limits): ConsumeResult | undefined {
    const local = table.take(id, limits)
    if (local !== undefined) rates.hit(id)
    return local
  }

  async function consume (id: string, limits: Limits, ban: BanPolicy | null): Promise<ConsumeResult> {
    const local = take(id, limits)
    if (local !== undefined) return local
    const rate = rates.hit(id)
    // Cold, a lease already being asked for, or no room left at the last answer: one decision in Redis.
    if (rate < minRate) return await inner.consume(id, limits, ban)
    if (pending.has(id) || (rates.roomOf(id) ?? 1) <= 0) {
      const result = await inner.consume(id, limits, ban)
      rates.noteRoom(id, roomOf(result, limits))
      return result
    }
    pending.add(id)
    try {
      return await leaseFor(id, limits, ban, rate)
    } finally {
      pending.delete(id)
    }
  }

  const sweeper = setInterval(() => { void giveBack(table.retireEnded()) }, opts.sweepMs ?? DEFAULT_LEASE_SWEEP_MS)
  sweeper.unref()

  return {
    kind: inner.kind,
    describe: () => inner.describe(),
    consume,
    peek: (id, limits) => inner.peek(id, limits),
    listBans: () => inner.listBans(),
    liftBan: (id) => inner.liftBan(id),
    escalationLevel: (id) => inner.escalationLevel(id),
    async reset (id) {
      // Whatever this lease counted is wiped with the windows: nothing to give back.
      table.drop(id)
      return await inner.reset(id)
    },
    watchBanLifts (onLift) {
      // A lift or reset anywhere: this process's lease for the consumer ends at once (a reset wiped
      // what it counted, so spending it would admit uncounted requests; nothing is handed back).
      inner.watchBanLifts((id) => {
        table.drop(id)
        onLift(id)
      })
    },
    ping: () => inner.ping(),
    async close () {
      clearInterval(sweeper)
      await giveBack(table.retireAll())
      await inner.close()
    },
    shardOf: (id) => inner.shardOf(id),
    maxmemoryPolicy: () => inner.maxmemoryPolicy(),
    take,
    leases: () => table.size
  }
}
