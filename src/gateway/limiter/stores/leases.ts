// The lease table: a hot consumer's requests admitted in this process without a Redis round trip,
// and still never one admission more than the limit allows. A process that sees a consumer often
// (DEFAULT_LEASE_MIN_RATE requests in the last second) asks the script for a block of admissions
// instead of one: the block is counted in Redis at once, in the current buckets (1 s minute bucket,
// 15 min day bucket), and this process spends it locally until that minute bucket ends *by Redis
// time*: local deadline = local send time + (bucket end − Redis now) − margin. The script ran after
// the send, so Redis time at any local instant L is at most Redis now + (L − send time): every
// local admission lands in the bucket it was counted in, and the script's window arithmetic holds
// as if each request had been counted on its own. What is not spent is handed back (subtracted
// from those same buckets) with the next lease or by a sweep once the lease has ended.
//
// The script sizes the block: never more than the observed rate asks for, and never more than a
// fair share of the room left — split among the processes that leased the consumer in this bucket
// or the one before, one share kept back for a newcomer — so near the limit blocks shrink to one
// and the last requests of a window are decided in Redis one by one, exactly as without leases. A
// request that finds no room in its lease goes to the normal consume call, which counts 429s and
// bans as before. Headers stay exact for one process: a lease's remaining is limit − (count in
// Redis at grant − admissions of the block not yet spent).
//
// Bans and resets: a ban started by another process reaches this one at its lease's end (< 1 s;
// the admissions meanwhile were counted, so within the limit) or through the plugin's ban cache; a
// lift or reset anywhere ends this process's lease at once (watchBanLifts), since a reset wiped what
// the lease counted.
//
// Crash bound: a process that dies holding leases leaves their unspent admissions counted. Each
// consumer has at most one live lease per process, of at most the rate it saw for the rest of one
// second (and at most half the room left), so a crash under-admits that consumer by at most one
// second of its traffic, for one minute in the minute window and for 24 h 15 min in the day window.
import { randomBytes } from 'node:crypto'
import type { BanPolicy, Limits } from '../../config/types.js'
import { DAY_WINDOW, MINUTE_WINDOW } from '../arithmetic.js'
import type { ConsumeResult, LimiterStore } from '../store.js'
import type { RedisStore, Unused } from './redis.js'

/** Requests per second (as seen by this process) from which a consumer gets leases. */
export const DEFAULT_LEASE_MIN_RATE = 20
/** Deadline margin for clock-rate drift and timer granularity, in ms. */
export const DEFAULT_LEASE_MARGIN_MS = 10
/** How often ended leases that no request renewed are handed back. */
export const DEFAULT_LEASE_SWEEP_MS = 1_000
/** A block never exceeds the observed rate by more than this factor (bursts within the second). */
const RATE_HEADROOM = 1.5
const MINUTE_BUCKET_MS = MINUTE_WINDOW.bucketMs

interface Lease {
  readonly limits: Limits
  readonly minuteBucket: number
  readonly dayBucket: number
  readonly granted: number
  used: number
  /** performance.now() after which the lease may no longer admit. */
  readonly deadline: number
  /** performance.now() when the lease was asked for, and the Redis clock the script read. */
  readonly sentAt: number
  readonly result: ConsumeResult
}

export interface LeaseOptions {
  minRate?: number
  marginMs?: number
  sweepMs?: number
  /** This process's holder id in the script's fair-share bookkeeping (default: random). */
  holder?: string
}

export interface LeasedStore extends LimiterStore {
  /** Leases alive now (tests, metrics). */
  leases: () => number
}

export function createLeasedStore (inner: RedisStore, opts: LeaseOptions = {}): LeasedStore {
  const minRate = opts.minRate ?? DEFAULT_LEASE_MIN_RATE
  const marginMs = opts.marginMs ?? DEFAULT_LEASE_MARGIN_MS
  const holder = opts.holder ?? randomBytes(6).toString('base64url')
  const table = new Map<string, Lease>()
  /**
   * Leases being asked for. Other requests of the consumer do not wait for one (that would put two
   * round trips inside one store timeout budget): they are decided in Redis one by one meanwhile.
   */
  const pending = new Set<string>()
  /** Room (limit − count, the tighter window) each hot consumer had at its last answer this second. */
  let room = new Map<string, number>()
  /** Requests per consumer in the current and the previous local second (lease hits and Redis calls). */
  let second = Math.floor(Date.now() / 1000)
  let current = new Map<string, number>()
  let previous = new Map<string, number>()

  function touch (id: string): number {
    const s = Math.floor(Date.now() / 1000)
    if (s !== second) {
      previous = s === second + 1 ? current : new Map()
      current = new Map()
      room = new Map()
      second = s
    }
    const n = (current.get(id) ?? 0) + 1
    current.set(id, n)
    return Math.max(n, previous.get(id) ?? 0)
  }

  function unusedOf (lease: Lease): Unused | undefined {
    const count = lease.granted - lease.used
    return count > 0 ? { minuteBucket: lease.minuteBucket, dayBucket: lease.dayBucket, count } : undefined
  }

  /** Takes one admission from a live lease, as the script would have answered it. */
  function take (id: string, limits: Limits): ConsumeResult | undefined {
    const lease = table.get(id)
    if (lease === undefined || lease.used >= lease.granted || lease.limits !== limits) return undefined
    const t = performance.now()
    if (t >= lease.deadline) return undefined
    lease.used++
    touch(id)
    const unspent = lease.granted - lease.used
    const r = lease.result
    return {
      outcome: 'ok',
      now: r.now + Math.floor(t - lease.sentAt),
      minute: { count: r.minute.count - unspent, resetAt: r.minute.resetAt, retryAt: 0 },
      day: { count: r.day.count - unspent, resetAt: r.day.resetAt, retryAt: 0 },
      bannedUntil: 0
    }
  }

  function retire (id: string): Unused | undefined {
    const lease = table.get(id)
    if (lease === undefined) return undefined
    table.delete(id)
    return unusedOf(lease)
  }

  async function leaseFor (id: string, limits: Limits, ban: BanPolicy | null, rate: number): Promise<ConsumeResult> {
    // The lease this one replaces (ended, spent, or for limits a reload changed) hands back with it.
    const unused = retire(id)
    const msLeft = MINUTE_BUCKET_MS - (Date.now() % MINUTE_BUCKET_MS)
    const want = Math.max(2, Math.ceil(rate * RATE_HEADROOM * msLeft / 1000))
    const sentAt = performance.now()
    const { result, granted } = await inner.lease(id, limits, ban, want, holder, unused)
    room.set(id, Math.min(limits.perMinute - result.minute.count, limits.perDay - result.day.count))
    if (granted > 0) {
      const bucketEnd = (Math.floor(result.now / MINUTE_BUCKET_MS) + 1) * MINUTE_BUCKET_MS
      const deadline = sentAt + (bucketEnd - result.now) - marginMs
      const replaced = table.get(id)
      const leftover = replaced === undefined ? undefined : unusedOf(replaced)
      if (leftover !== undefined) inner.giveBack(id, leftover).catch(() => { /* counted: a lost return only under-admits */ })
      table.set(id, { limits, minuteBucket: Math.floor(result.now / MINUTE_BUCKET_MS), dayBucket: Math.floor(result.now / DAY_WINDOW.bucketMs), granted, used: 1, deadline, sentAt, result })
      const unspent = granted - 1
      return { ...result, minute: { ...result.minute, count: result.minute.count - unspent }, day: { ...result.day, count: result.day.count - unspent } }
    }
    return result
  }

  async function consume (id: string, limits: Limits, ban: BanPolicy | null): Promise<ConsumeResult> {
    const local = take(id, limits)
    if (local !== undefined) return local
    const rate = touch(id)
    // Cold, a lease already being asked for, or no room left at the last answer: one decision in Redis.
    if (rate < minRate) return await inner.consume(id, limits, ban)
    if (pending.has(id) || (room.get(id) ?? 1) <= 0) {
      const result = await inner.consume(id, limits, ban)
      room.set(id, Math.min(limits.perMinute - result.minute.count, limits.perDay - result.day.count))
      return result
    }
    pending.add(id)
    try {
      return await leaseFor(id, limits, ban, rate)
    } finally {
      pending.delete(id)
    }
  }

  function sweep (): void {
    const t = performance.now()
    for (const [id, lease] of table) {
      if (t < lease.deadline || pending.has(id)) continue
      table.delete(id)
      const unused = unusedOf(lease)
      if (unused !== undefined) inner.giveBack(id, unused).catch(() => { /* a lost return only under-admits */ })
    }
  }
  const sweeper = setInterval(sweep, opts.sweepMs ?? DEFAULT_LEASE_SWEEP_MS)
  sweeper.unref()

  return {
    ...inner,
    consume,
    tryLocal: take,
    leases: () => table.size,
    watchBanLifts (onLift) {
      // A lift or reset anywhere: this process's lease for the consumer ends at once (a reset wiped
      // what it counted, so spending it would admit uncounted requests; nothing is handed back).
      inner.watchBanLifts?.((id) => {
        if (id === undefined) table.clear()
        else table.delete(id)
        onLift(id)
      })
    },
    async reset (id) {
      // Whatever this lease counted is wiped with the windows: nothing to give back.
      table.delete(id)
      return await inner.reset(id)
    },
    async close () {
      clearInterval(sweeper)
      const returns = [...table].map(async ([id, lease]) => {
        const unused = unusedOf(lease)
        if (unused !== undefined) await inner.giveBack(id, unused).catch(() => undefined)
      })
      table.clear()
      await Promise.all(returns)
      await inner.close()
    }
  }
}
