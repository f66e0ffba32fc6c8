// The Redis store made safe to depend on: every call bounded in time (bounded-call.ts), a circuit
// breaker per shard (breakers.ts), and while Redis fails the STORE_ON_ERROR policy answers
// (fallback-policy.ts). A request never waits on Redis for more than its budget, a store error
// never escapes as a crash, and traffic returns to Redis by itself once a probe is answered. A
// failure before a breaker opens is answered by the policy too (the request never waits twice).
// Admin calls (list, lift, escalation, reset) go to Redis only, with a longer budget, and fail
// fast while their shard's breaker refuses calls. Admissions that need no Redis call (the lease
// table's, `local`) are answered first: no timer, and they go on while a breaker is open.
//
// Under `local` it also keeps the limit through the fault (docs/limiter-internals.md, "Through
// faults"): the fallback decides from what this process last heard (knowledge.ts) and its share
// of the room (local-fallback.ts); what it admitted goes back into Redis (write-back.ts) — a
// consumer with admissions not yet counted there is decided by the fallback until they are; a
// breaker closes only after its probe has checked the shard's epoch (process-registry.ts),
// re-seeded a shard that lost its data from this process's knowledge, and written back; and bans
// the fallback decided are forgotten once every breaker is closed.
import type { BanPolicy, Limits } from '../../config/types.js'
import { DAY_WINDOW, MINUTE_WINDOW } from '../arithmetic.js'
import type { StoreHealth } from '../store-health.js'
import type { ConsumeResult, LimiterStore } from '../store.js'
import { asError, boundedCall, StoreTimeoutError } from './bounded-call.js'
import { createBreakers, type Breaker } from './breakers.js'
import { createFallbackPolicy, DEFAULT_STORE_ON_ERROR, StoreUnavailableError, type StoreOnError } from './fallback-policy.js'
import { createKnowledge, type Knowledge } from './knowledge.js'
import { createLocalFallback, DEFAULT_CLOCK_MARGIN_MS } from './local-fallback.js'
import { createMemoryStore } from './memory.js'
import { createProcessRegistry, type ProcessRegistry } from './process-registry.js'
import type { RecoveryCalls } from './redis-recovery.js'
import { createLedger } from './write-back.js'

/** STORE_TIMEOUT_MS: a call whose shard has answered nothing for this long fails over. */
export const DEFAULT_STORE_TIMEOUT_MS = 50
/** Hard cap on a call that keeps being postponed because Redis answers others (a deep pipeline). */
export const DEFAULT_STORE_MAX_WAIT_MS = 250
/** Listing and lifting bans (admin API, CLI) are not on the hot path: a longer budget. */
export const DEFAULT_ADMIN_TIMEOUT_MS = 2_000
/** How often fallback admissions not yet written back are retried, and what left every window dropped. */
export const DEFAULT_WRITE_BACK_SWEEP_MS = 1_000
/** Consumers re-seeded at once after a loss (each one script call). */
const RESEED_CONCURRENCY = 500

export interface ResilientStoreOptions {
  timeoutMs?: number
  onError?: StoreOnError
  maxWaitMs?: number
  breakerFailures?: number
  coolDownMs?: number
  firstProbeMs?: number
  adminTimeoutMs?: number
  /** The in-process store keeping the `local` fallback's bans and anonymous windows (default: a fresh one on `now`). */
  fallback?: LimiterStore
  /** Every primary failure (timeouts included), for logs. */
  onFailure?: (err: Error) => void
  /** The first breaker opened (true), or none is open any more (false). */
  onBreaker?: (open: boolean) => void
  /** The gateway clock, Unix ms (the `open` policy's answer, the fallback). */
  now?: () => number
  /** An admission this process may answer without a Redis call (the lease table's `take`), or undefined: ask Redis. */
  local?: ((id: string, limits: Limits) => ConsumeResult | undefined) | undefined
  /** What this process heard from Redis (the Redis store learns it from every reply); default: an empty one. */
  knowledge?: Knowledge
  /** Redis's side of recovery (epochs, registry, write-back, re-seed, connection events); without it a probe is a ping. */
  recovery?: RecoveryCalls
  /** This process's id in the registry and write-backs. */
  holder?: string
  /** Processes sharing the consumers when there is no registry (default 1). */
  processes?: () => number
}

/** What the resilient store needs from the store it guards, besides the contract (the Redis store, or the lease table around it). */
export interface RemoteStore extends LimiterStore {
  /** The part of the store holding `id` (a Cluster master, `host:port`) so a breaker opens for a lost node only; '' : one part. */
  shardOf: (id: string) => string
  /** Redis `maxmemory-policy`, or undefined where CONFIG GET is not allowed. */
  maxmemoryPolicy: () => Promise<string | undefined>
}

/** The guarded store and the health it reports. */
export interface ResilientStore extends LimiterStore, StoreHealth {
  /** Registers this process and reads the shards' epochs (create-store awaits it once Redis is ready). */
  start: () => Promise<void>
}

export function createResilientStore (primary: RemoteStore, opts: ResilientStoreOptions = {}): ResilientStore {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_STORE_TIMEOUT_MS
  const maxWaitMs = Math.max(timeoutMs, opts.maxWaitMs ?? DEFAULT_STORE_MAX_WAIT_MS)
  const adminTimeoutMs = opts.adminTimeoutMs ?? DEFAULT_ADMIN_TIMEOUT_MS
  const now = opts.now ?? Date.now
  const policy = opts.onError ?? DEFAULT_STORE_ON_ERROR
  const shardOf = (id: string): string => primary.shardOf(id)
  const local = opts.local
  const recovery = opts.recovery
  const holder = opts.holder ?? 'gateway'
  const knowledge = opts.knowledge ?? createKnowledge({ shardOf, now })
  const bans = opts.fallback ?? createMemoryStore({ now })
  /** Shards whose data was lost, to re-seed before their breaker closes. */
  const lost = new Set<string>()
  /** Answers the fallback gave (StoreHealth.localAnswer). */
  const localAnswers = new WeakSet<ConsumeResult>()
  let errors = 0
  let closing = false

  const bounded = <T>(call: () => Promise<T>, budgetMs = adminTimeoutMs): Promise<T> => boundedCall(call, { budgetMs, capMs: budgetMs })
  const breakers = createBreakers({
    failures: opts.breakerFailures,
    coolDownMs: opts.coolDownMs,
    firstProbeMs: opts.firstProbeMs,
    probe: verify,
    onChange (open) {
      // Every shard answers again: the fallback's bans and anonymous windows are forgotten.
      if (!open) for (const id of fallbackLocal.drain()) void bans.reset(id)
      opts.onBreaker?.(open)
    }
  })
  const breakerOf = (id: string): Breaker => breakers.of(shardOf(id))
  const ledger = createLedger({
    send: async (id, seq, entries) => {
      if (recovery === undefined) throw new Error('no write-back without Redis')
      return await bounded(() => recovery.writeBack(id, holder, seq, entries), timeoutMs * 4)
    },
    canSend: (id) => recovery !== undefined && !breakers.refusing(breakerOf(id))
  })
  knowledge.onLearn((id, at) => { if (ledger.size > 0) ledger.covered(id, at) })
  const registry: ProcessRegistry | undefined = recovery === undefined
    ? undefined
    : createProcessRegistry(recovery, {
      holder,
      bounded,
      onLost (shard) {
        lost.add(shard)
        failed(new Error(`limiter store lost its data (${shard === '' ? 'redis' : shard})`))
        suspect(shard)
      }
    })
  const fallbackLocal = createLocalFallback({
    knowledge,
    ledger,
    processes: () => registry?.processes() ?? opts.processes?.() ?? 1,
    shardOf,
    failedSince: (shard) => breakers.of(shard).failedSince,
    inFlight: (id) => inFlight.get(id) ?? 0,
    store: () => bans,
    now
  })
  const fallback = createFallbackPolicy(policy, fallbackLocal, now)
  recovery?.watchConnections({
    lost (shard) {
      if (closing) return
      // A dropped connection is a store failure even when no call was in flight to fail with it.
      failed(new Error(`limiter store connection lost (${shard === '' ? 'redis' : shard})`))
      suspect(shard)
    },
    ready (shard) { breakers.nudge(breakers.of(shard)) }
  })
  const sweeper = setInterval(() => {
    if (ledger.size === 0) return
    ledger.prune(windowStart)
    void ledger.flushAll()
  }, DEFAULT_WRITE_BACK_SWEEP_MS)
  sweeper.unref()

  /** The oldest minute and day bucket still in `id`'s windows, by the earliest Redis time it can be. */
  function windowStart (id: string): { minute: number, day: number } {
    const t = now() + (knowledge.clock(shardOf(id))?.lo ?? -DEFAULT_CLOCK_MARGIN_MS)
    return { minute: Math.floor(t / MINUTE_WINDOW.bucketMs) - MINUTE_WINDOW.slots + 1, day: Math.floor(t / DAY_WINDOW.bucketMs) - DAY_WINDOW.slots + 1 }
  }

  /** `shard`'s connection dropped or its data was lost: fallback until a probe has verified it. */
  function suspect (shard: string): void {
    knowledge.suspend(shard)
    breakers.suspect(breakers.of(shard))
  }

  /** The probe of an open breaker: the shard answers, holds the data it held (else it is re-seeded), and has the fallback's admissions. */
  async function verify (shard: string): Promise<void> {
    if (registry === undefined || recovery === undefined) {
      await bounded(() => primary.ping(), timeoutMs)
      return
    }
    await registry.verify(shard)
    if (lost.has(shard)) {
      ledger.lost((id) => shardOf(id) === shard)
      await reseed(recovery, shard)
      lost.delete(shard)
    }
    knowledge.resume(shard)
    // Best effort: a consumer whose write-back fails stays with the fallback until it succeeds.
    await ledger.flushAll((id) => shardOf(id) === shard)
  }

  async function reseed (calls: RecoveryCalls, shard: string): Promise<void> {
    const dayAgo = now() - DAY_WINDOW.slots * DAY_WINDOW.bucketMs
    const floors = [...knowledge.entries()].filter(([id, k]) => shardOf(id) === shard && (k.at > dayAgo || k.bannedUntil > 0))
    for (let i = 0; i < floors.length; i += RESEED_CONCURRENCY) {
      await Promise.all(floors.slice(i, i + RESEED_CONCURRENCY).map(async ([id, k]) => {
        const counted = Number.isFinite(k.at)
        await bounded(() => calls.reseed(id, {
          minuteBucket: counted ? Math.floor(k.at / MINUTE_WINDOW.bucketMs) : 0,
          minute: counted ? k.minute : 0,
          dayBucket: counted ? Math.floor(k.at / DAY_WINDOW.bucketMs) : 0,
          day: counted ? k.day : 0,
          bannedUntil: k.bannedUntil
        }))
      }))
    }
  }

  function failed (err: unknown): Error {
    const e = asError(err)
    errors++
    opts.onFailure?.(e)
    return e
  }

  async function degraded (answer: Promise<ConsumeResult>): Promise<ConsumeResult> {
    const result: ConsumeResult = { ...await answer, via: 'fallback' }
    localAnswers.add(result)
    return result
  }

  /** This process's decision calls per consumer that Redis has not answered yet (the fallback counts them as admitted). */
  const inFlight = new Map<string, number>()
  function settled (id: string): void {
    const n = (inFlight.get(id) ?? 1) - 1
    if (n > 0) inFlight.set(id, n)
    else inFlight.delete(id)
  }

  async function consume (id: string, limits: Limits, ban: BanPolicy | null): Promise<ConsumeResult> {
    const breaker = breakerOf(id)
    if (breakers.pass(breaker) === 'refused') return await degraded(fallback.consume(id, limits, ban, 'limiter store circuit open'))
    // Admissions the fallback made are not in Redis yet: deciding there would not see them.
    if (ledger.size > 0 && ledger.unresolved(id)) return await degraded(fallback.consume(id, limits, ban, 'fallback admissions not yet written back'))
    let late: Promise<ConsumeResult> | undefined
    let result: ConsumeResult
    inFlight.set(id, (inFlight.get(id) ?? 0) + 1)
    try {
      result = await boundedCall(() => (late = primary.consume(id, limits, ban)), { budgetMs: timeoutMs, capMs: maxWaitMs, progress: breaker })
    } catch (err) {
      const e = failed(err)
      breakers.settle(breaker, false)
      if (!(err instanceof StoreTimeoutError) || late === undefined) {
        settled(id)
        return await degraded(fallback.consume(id, limits, ban, e.message))
      }
      // A timed-out script is still queued in Redis: its late reply tells whether it counted this
      // request, and that Redis answers again — an open breaker probes at once, so this process's
      // fallback admissions are written back as soon as other processes can decide in Redis again.
      late.then(() => {
        settled(id)
        breakers.nudge(breaker)
      }, () => { settled(id) })
      return await degraded(fallback.consume(id, limits, ban, e.message, late))
    }
    settled(id)
    breakers.settle(breaker, true)
    return result
  }

  async function peek (id: string, limits: Limits): Promise<ConsumeResult> {
    const breaker = breakerOf(id)
    if (breakers.pass(breaker) === 'refused') return await degraded(fallback.peek(id, limits, 'limiter store circuit open'))
    try {
      const result = await boundedCall(() => primary.peek(id, limits), { budgetMs: timeoutMs, capMs: maxWaitMs, progress: breaker })
      breakers.settle(breaker, true)
      return result
    } catch (err) {
      const e = failed(err)
      breakers.settle(breaker, false)
      return await degraded(fallback.peek(id, limits, e.message))
    }
  }

  /** Admin calls: Redis only, failing fast while a breaker of theirs (any, for calls on every shard) refuses. */
  async function admin<T> (shards: Breaker[], call: () => Promise<T>): Promise<T> {
    if (shards.some(breakers.refusing)) throw new StoreUnavailableError('limiter store circuit open')
    try {
      return await bounded(call)
    } catch (err) {
      throw failed(err)
    }
  }

  const ping = (): Promise<void> => bounded(() => primary.ping())

  return {
    kind: primary.kind,
    describe: () => primary.describe(),
    consume: (id: string, limits: Limits, ban: BanPolicy | null) => {
      const admitted = local?.(id, limits)
      if (admitted !== undefined) return Promise.resolve(admitted)
      return consume(id, limits, ban)
    },
    peek,
    listBans: () => admin(breakers.all(), () => primary.listBans()),
    async liftBan (id) {
      const wasLocal = await bans.liftBan(id)
      const entry = knowledge.get(id)
      if (entry !== undefined) entry.bannedUntil = 0
      return await admin([breakerOf(id)], () => primary.liftBan(id)) || wasLocal
    },
    escalationLevel: (id) => admin([breakerOf(id)], () => primary.escalationLevel(id)),
    async reset (id) {
      // The fallback may hold counts and bans from an outage: a clean slate clears them too.
      const wasLocal = await bans.reset(id)
      ledger.forget(id)
      knowledge.forget(id)
      return await admin([breakerOf(id)], () => primary.reset(id)) || wasLocal
    },
    watchBanLifts: (onLift) => { primary.watchBanLifts(onLift) },
    /** A real round trip to Redis, whatever the policy. */
    ping,
    async start () {
      await registry?.start()
    },
    async close () {
      closing = true
      clearInterval(sweeper)
      breakers.close()
      // What the fallback admitted reaches Redis before this process goes, if Redis answers.
      await ledger.flushAll().catch(() => undefined)
      await registry?.close()
      await Promise.all([primary.close(), bans.close()])
    },
    errors: () => errors,
    // Open breakers, or admissions of the fallback not yet counted in Redis: a consumer whose call
    // timed out is decided by the fallback until they are, even while every breaker stays closed.
    fallbackActive: () => breakers.anyOpen() || ledger.anyUnresolved(),
    localAnswer: (result) => localAnswers.has(result),
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
