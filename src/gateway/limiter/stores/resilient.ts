// The Redis store made safe to depend on: every call bounded in time (bounded-call.ts), a circuit
// breaker per shard (breakers.ts), and while Redis fails the STORE_ON_ERROR policy answers
// (fallback-policy.ts). A request never waits on Redis for more than its budget, a store error
// never escapes as a crash, and traffic returns to Redis by itself once a probe is answered. A
// failure before a breaker opens is answered by the policy too (the request never waits twice).
// Admin calls (list, lift, escalation, reset) go to Redis only, with a longer budget, and fail
// fast while their shard's breaker refuses calls. Admissions that need no Redis call (the lease
// table's, `local`) are answered first: no timer, and they go on while a breaker is open.
import type { BanPolicy, Limits } from '../../config/types.js'
import type { StoreHealth } from '../store-health.js'
import type { ConsumeResult, LimiterStore } from '../store.js'
import { asError, boundedCall } from './bounded-call.js'
import { createBreakers, type Breaker } from './breakers.js'
import { createFallbackPolicy, DEFAULT_STORE_ON_ERROR, StoreUnavailableError, type StoreOnError } from './fallback-policy.js'
import { createMemoryStore } from './memory.js'

/** STORE_TIMEOUT_MS: a call whose shard has answered nothing for this long fails over. */
export const DEFAULT_STORE_TIMEOUT_MS = 50
/** Hard cap on a call that keeps being postponed because Redis answers others (a deep pipeline). */
export const DEFAULT_STORE_MAX_WAIT_MS = 250
/** Listing and lifting bans (admin API, CLI) are not on the hot path: a longer budget. */
export const DEFAULT_ADMIN_TIMEOUT_MS = 2_000

export interface ResilientStoreOptions {
  timeoutMs?: number
  onError?: StoreOnError
  maxWaitMs?: number
  breakerFailures?: number
  coolDownMs?: number
  adminTimeoutMs?: number
  /** The store that answers under `local` (default: a fresh in-process store on `now`). */
  fallback?: LimiterStore
  /** Every primary failure (timeouts included), for logs. */
  onFailure?: (err: Error) => void
  /** The first breaker opened (true), or none is open any more (false). */
  onBreaker?: (open: boolean) => void
  /** The gateway clock, Unix ms (the `open` policy's answer, the default fallback store). */
  now?: () => number
  /** An admission this process may answer without a Redis call (the lease table's `take`), or undefined: ask Redis. */
  local?: ((id: string, limits: Limits) => ConsumeResult | undefined) | undefined
}

/** What the resilient store needs from the store it guards, besides the contract (the Redis store, or the lease table around it). */
export interface RemoteStore extends LimiterStore {
  /** The part of the store holding `id` (a Cluster master, `host:port`) so a breaker opens for a lost node only; '' : one part. */
  shardOf: (id: string) => string
  /** Redis `maxmemory-policy`, or undefined where CONFIG GET is not allowed. */
  maxmemoryPolicy: () => Promise<string | undefined>
}

/** The guarded store and the health it reports. */
export interface ResilientStore extends LimiterStore, StoreHealth {}

export function createResilientStore (primary: RemoteStore, opts: ResilientStoreOptions = {}): ResilientStore {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_STORE_TIMEOUT_MS
  const maxWaitMs = Math.max(timeoutMs, opts.maxWaitMs ?? DEFAULT_STORE_MAX_WAIT_MS)
  const adminTimeoutMs = opts.adminTimeoutMs ?? DEFAULT_ADMIN_TIMEOUT_MS
  const now = opts.now ?? Date.now
  const fallback = createFallbackPolicy(opts.onError ?? DEFAULT_STORE_ON_ERROR, opts.fallback ?? createMemoryStore({ now }), now)
  const breakers = createBreakers({ failures: opts.breakerFailures, coolDownMs: opts.coolDownMs, onChange: opts.onBreaker })
  const local = opts.local
  let errors = 0

  function failed (err: unknown): Error {
    const e = asError(err)
    errors++
    opts.onFailure?.(e)
    return e
  }

  /** The hot path: Redis unless the shard's breaker refuses (one probe per cool-down), else the policy. */
  async function guarded<T> (id: string, remote: () => Promise<T>, degraded: (reason: string) => Promise<T>): Promise<T> {
    const breaker = breakers.of(primary.shardOf(id))
    const passage = breakers.pass(breaker)
    if (passage === 'refused') return await degraded('limiter store circuit open')
    let result: T
    try {
      result = await boundedCall(remote, { budgetMs: timeoutMs, capMs: maxWaitMs, progress: breaker })
    } catch (err) {
      const e = failed(err)
      breakers.settle(breaker, false, passage)
      return await degraded(e.message)
    }
    breakers.settle(breaker, true, passage)
    return result
  }

  /** Admin calls: Redis only, failing fast while a breaker of theirs (any, for calls on every shard) refuses. */
  async function admin<T> (shards: Breaker[], call: () => Promise<T>): Promise<T> {
    if (shards.some(breakers.refusing)) throw new StoreUnavailableError('limiter store circuit open')
    try {
      return await boundedCall(call, { budgetMs: adminTimeoutMs, capMs: adminTimeoutMs })
    } catch (err) {
      throw failed(err)
    }
  }

  const breakerOf = (id: string): Breaker => breakers.of(primary.shardOf(id))
  const ping = (): Promise<void> => boundedCall(() => primary.ping(), { budgetMs: adminTimeoutMs, capMs: adminTimeoutMs })

  return {
    kind: primary.kind,
    describe: () => primary.describe(),
    consume: (id: string, limits: Limits, ban: BanPolicy | null) => {
      const admitted = local?.(id, limits)
      if (admitted !== undefined) return Promise.resolve(admitted)
      return guarded(id, () => primary.consume(id, limits, ban), (reason) => fallback.consume(id, limits, ban, reason))
    },
    peek: (id: string, limits: Limits) =>
      guarded(id, () => primary.peek(id, limits), (reason) => fallback.peek(id, limits, reason)),
    listBans: () => admin(breakers.all(), () => primary.listBans()),
    async liftBan (id) {
      const local = await fallback.local.liftBan(id)
      return await admin([breakerOf(id)], () => primary.liftBan(id)) || local
    },
    escalationLevel: (id) => admin([breakerOf(id)], () => primary.escalationLevel(id)),
    async reset (id) {
      // The fallback may hold counts from an outage: a clean slate clears both.
      const local = await fallback.local.reset(id)
      return await admin([breakerOf(id)], () => primary.reset(id)) || local
    },
    watchBanLifts: (onLift) => { primary.watchBanLifts(onLift) },
    /** A real round trip to Redis, whatever the policy. */
    ping,
    async close () {
      breakers.close()
      await Promise.all([primary.close(), fallback.local.close()])
    },
    errors: () => errors,
    fallbackActive: () => breakers.anyOpen(),
    async probe () {
      try {
        await ping()
      } catch (err) {
        return fallback.state(asError(err).message)
      }
      return breakers.anyOpen() ? fallback.state('limiter store circuit open') : 'ok'
    },
    maxmemoryPolicy: () => primary.maxmemoryPolicy()
  }
}
