// The shared store made safe to depend on: a wrapper around the Redis store that bounds every call
// with a timeout, opens a circuit breaker when Redis keeps failing, and while it is open answers
// with the `STORE_ON_ERROR` policy — `local` (an in-process store takes over, limits per process),
// `open` (admit) or `closed` (reject: the limiter answers 503). After a cool-down one real call
// probes Redis; if it answers, the breaker closes and traffic returns to Redis by itself. A request
// never waits on Redis for more than the timeout budget and a store error never escapes as a crash.
// There is one breaker per shard (`LimiterStore.shardOf`: the Cluster master of the key's slot), so
// a lost Cluster node sends only its own keys to the fallback while the others keep counting in Redis.
// A breaker opens after DEFAULT_BREAKER_FAILURES consecutive failures; a failure before that is
// answered by the policy too (the request never waits twice), it just does not switch the shard yet.
//
// Why the timeout cannot fire for a reply that has already arrived. Node runs due timers *before*
// it reads sockets in the same event-loop turn (timers phase → poll phase → check phase). When a
// burst keeps the loop busy past 50 ms, a plain `setTimeout` fires for commands whose replies are
// already waiting in the socket buffer — a false timeout on a healthy Redis, answered from the local
// store, i.e. over-admission. So the timer only *arms* the verdict: it defers it with `setImmediate`,
// which runs in the check phase, after the poll phase of the same turn has read every reply already
// received (ioredis resolves them synchronously from the data callback, and the promise reactions
// run before the loop moves on). Only a call still pending then is late. The budget itself starts
// when the command is written, not when it is issued: the Redis store batches the calls of one
// turn into one write at process.nextTick (stores/redis.ts), so the timer is armed in a nextTick
// queued after that one — a turn that issues calls and then stays busy writes them only when it
// ends, and its calls' budgets start then too.
//
// A deep pipeline is the second source of false timeouts: a burst of 2,000 requests puts 2,000
// scripts in Redis's queue, and the last ones wait behind the others although Redis is working at
// full speed. So the 50 ms is a budget *without progress*: at the verdict, if the shard gave a
// reply less than `timeoutMs` ago (Redis is answering, our command is queued), the verdict is
// postponed until the store has been silent for `timeoutMs`, capped at `maxWaitMs` from the call.
// A dead or frozen Redis answers nothing, so its calls still fail after `timeoutMs`.
import type { BanPolicy, Limits } from '../../config/types.js'
import { DEFAULT_STORE_ON_ERROR, DEFAULT_STORE_TIMEOUT_MS, type StoreOnError } from '../../runtime/settings.js'
import { DAY_WINDOW, MINUTE_WINDOW } from '../arithmetic.js'
import type { BanEntry, ConsumeResult, LimiterStore, StoreState } from '../store.js'
import { createMemoryStore } from './memory.js'

export { DEFAULT_STORE_ON_ERROR, DEFAULT_STORE_TIMEOUT_MS }
/** Hard cap on a call that keeps being postponed because Redis answers others (a deep pipeline). */
export const DEFAULT_STORE_MAX_WAIT_MS = 250
/** Consecutive failed calls that open the breaker (a lone slow reply does not switch a process). */
export const DEFAULT_BREAKER_FAILURES = 3
/** Open breaker: how long before one call probes Redis again. */
export const DEFAULT_BREAKER_COOLDOWN_MS = 1_000
/**
 * A Cluster shard whose open breaker no request has probed for this many cool-downs no longer owns
 * slots (failover moved them to a replica, which gets a breaker of its own): forget it, so the
 * fallback gauge does not stay at 1 for a node that left.
 */
export const STALE_SHARD_COOLDOWNS = 10
/** Listing and lifting bans (admin API, CLI) are not on the hot path: a longer budget. */
export const DEFAULT_ADMIN_TIMEOUT_MS = 2_000

export class StoreTimeoutError extends Error {
  constructor (ms: number) {
    super(`limiter store did not answer within ${ms} ms`)
    this.name = 'StoreTimeoutError'
  }
}

/** Thrown under the `closed` policy while Redis is failing: the limiter answers 503 `unavailable`. */
export class StoreUnavailableError extends Error {
  constructor (reason: string) {
    super(reason)
    this.name = 'StoreUnavailableError'
  }
}

export interface ResilientStoreOptions {
  timeoutMs?: number
  onError?: StoreOnError
  maxWaitMs?: number
  breakerFailures?: number
  coolDownMs?: number
  adminTimeoutMs?: number
  /** The store that answers under `local` (default: a fresh in-process store). */
  fallback?: LimiterStore
  /** Every primary failure (timeouts included), for logs. */
  onFailure?: (err: Error) => void
  /** The breaker opened (true) or closed (false). */
  onBreaker?: (open: boolean) => void
}

type Call<T> = () => Promise<T>

interface Breaker {
  /** Consecutive failed calls. */
  failures: number
  open: boolean
  /** While open: when one call may probe Redis again. */
  probeAt: number
  probing: boolean
  /** Date.now() of the shard's last reply: the progress of its connection. */
  lastReplyAt: number
}

function message (err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err))
}

/** What `open` answers: admitted, nothing known about the windows (headers show the full limits). */
function admitted (): ConsumeResult {
  const now = Date.now()
  const empty = (bucketMs: number, slots: number): ConsumeResult['minute'] =>
    ({ count: 0, resetAt: (Math.floor(now / bucketMs) + slots) * bucketMs, retryAt: 0 })
  return {
    outcome: 'ok',
    now,
    minute: empty(MINUTE_WINDOW.bucketMs, MINUTE_WINDOW.slots),
    day: empty(DAY_WINDOW.bucketMs, DAY_WINDOW.slots),
    bannedUntil: 0
  }
}

export function createResilientStore (primary: LimiterStore, opts: ResilientStoreOptions = {}): LimiterStore {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_STORE_TIMEOUT_MS
  const maxWaitMs = Math.max(timeoutMs, opts.maxWaitMs ?? DEFAULT_STORE_MAX_WAIT_MS)
  const policy = opts.onError ?? DEFAULT_STORE_ON_ERROR
  const breakerFailures = opts.breakerFailures ?? DEFAULT_BREAKER_FAILURES
  const coolDownMs = opts.coolDownMs ?? DEFAULT_BREAKER_COOLDOWN_MS
  const adminTimeoutMs = opts.adminTimeoutMs ?? DEFAULT_ADMIN_TIMEOUT_MS
  const fallback = opts.fallback ?? createMemoryStore()

  const shardOf = primary.shardOf ?? ((): string => '')
  /** One breaker per shard (a Cluster master; one for standalone): a lost node falls back alone. */
  const breakers = new Map<string, Breaker>()
  let openCount = 0
  let errors = 0

  function breakerOf (shard: string): Breaker {
    let breaker = breakers.get(shard)
    if (breaker === undefined) {
      breaker = { failures: 0, open: false, probeAt: 0, probing: false, lastReplyAt: 0 }
      breakers.set(shard, breaker)
    }
    return breaker
  }

  /** `call()` bounded as the header explains: verdict after the poll phase, budget without progress. */
  function bounded<T> (call: Call<T>, budgetMs: number, capMs: number, shard: Breaker | undefined): Promise<T> {
    let started = Date.now()
    return new Promise<T>((resolve, reject) => {
      let done = false
      let timer: NodeJS.Timeout | undefined
      const verdict = (): void => {
        if (done) return
        const t = Date.now()
        const quietFor = t - (shard?.lastReplyAt ?? 0)
        const postpone = Math.min(budgetMs - quietFor, started + capMs - t)
        if (postpone > 0) {
          timer = setTimeout(arm, postpone)
          return
        }
        done = true
        reject(new StoreTimeoutError(budgetMs))
      }
      const arm = (): void => { setImmediate(verdict) }
      let pending: Promise<T>
      try {
        pending = call()
      } catch (err) {
        pending = Promise.reject(message(err))
      }
      // After call() queued its write (the store's nextTick batch), so this nextTick runs after it.
      process.nextTick(() => {
        if (done) return
        started = Date.now()
        timer = setTimeout(arm, budgetMs)
      })
      pending.then((value) => {
        if (shard !== undefined) shard.lastReplyAt = Date.now()
        if (done) return
        done = true
        clearTimeout(timer)
        resolve(value)
      }, (err: unknown) => {
        if (done) return
        done = true
        clearTimeout(timer)
        reject(message(err))
      })
    })
  }

  function failed (err: Error): void {
    errors++
    opts.onFailure?.(err)
  }

  function tripOrStay (breaker: Breaker): void {
    breaker.failures++
    if (!breaker.open && breaker.failures >= breakerFailures) {
      breaker.open = true
      if (openCount++ === 0) opts.onBreaker?.(true)
    }
    if (breaker.open) breaker.probeAt = Date.now() + coolDownMs
  }

  function recovered (breaker: Breaker): void {
    breaker.failures = 0
    if (breaker.open) {
      breaker.open = false
      if (--openCount === 0) opts.onBreaker?.(false)
    }
  }

  function fallbackActive (): boolean {
    if (openCount === 0) return false
    const stale = Date.now() - STALE_SHARD_COOLDOWNS * coolDownMs
    for (const [shard, breaker] of breakers) {
      if (shard !== '' && breaker.open && !breaker.probing && breaker.probeAt < stale) {
        breakers.delete(shard)
        if (--openCount === 0) opts.onBreaker?.(false)
      }
    }
    return openCount > 0
  }

  function shortCircuited (breaker: Breaker): boolean {
    return breaker.open && Date.now() < breaker.probeAt
  }

  async function degraded (local: Call<ConsumeResult>, reason: string): Promise<ConsumeResult> {
    if (policy === 'local') return await local()
    if (policy === 'open') return admitted()
    throw new StoreUnavailableError(reason)
  }

  /** The hot path: Redis unless the breaker is open (one probe per cool-down), else the policy. */
  async function guarded (id: string, remote: Call<ConsumeResult>, local: Call<ConsumeResult>): Promise<ConsumeResult> {
    const breaker = breakerOf(shardOf(id))
    let probe = false
    if (breaker.open) {
      if (breaker.probing || Date.now() < breaker.probeAt) return await degraded(local, 'limiter store circuit open')
      breaker.probing = true
      probe = true
    }
    try {
      const result = await bounded(remote, timeoutMs, maxWaitMs, breaker)
      recovered(breaker)
      return result
    } catch (err) {
      const e = message(err)
      failed(e)
      tripOrStay(breaker)
      return await degraded(local, e.message)
    } finally {
      if (probe) breaker.probing = false
    }
  }

  /** Admin calls go to Redis only (a local answer would mislead ops), fail fast while their shard's breaker (any, for all shards) is open. */
  async function admin<T> (shards: Breaker[], call: Call<T>): Promise<T> {
    if (shards.some(shortCircuited)) throw new StoreUnavailableError('limiter store circuit open')
    try {
      return await bounded(call, adminTimeoutMs, adminTimeoutMs, undefined)
    } catch (err) {
      const e = message(err)
      failed(e)
      throw e
    }
  }

  const tryLocal = primary.tryLocal
  return {
    kind: primary.kind,
    describe: () => primary.describe(),
    // A lease admission needs no Redis call, so no timer either: answered before `guarded`.
    consume: (id: string, limits: Limits, ban: BanPolicy | null) => {
      const local = tryLocal?.(id, limits)
      if (local !== undefined) return Promise.resolve(local)
      return guarded(id, () => primary.consume(id, limits, ban), () => fallback.consume(id, limits, ban))
    },
    ...(tryLocal === undefined ? {} : { tryLocal }),
    peek: (id: string, limits: Limits) =>
      guarded(id, () => primary.peek(id, limits), () => fallback.peek(id, limits)),
    listBans: (): Promise<BanEntry[]> => admin([...breakers.values()], () => primary.listBans()),
    async liftBan (id: string) {
      const local = await fallback.liftBan(id)
      return await admin([breakerOf(shardOf(id))], () => primary.liftBan(id)) || local
    },
    escalationLevel: (id: string) => admin([breakerOf(shardOf(id))], () => primary.escalationLevel(id)),
    async reset (id: string) {
      // The fallback may hold counts from an outage: a clean slate clears both.
      const local = await fallback.reset(id)
      return await admin([breakerOf(shardOf(id))], () => primary.reset(id)) || local
    },
    /** A real round trip to Redis, whatever the policy. */
    async ping () {
      await bounded(() => primary.ping(), adminTimeoutMs, adminTimeoutMs, undefined)
    },
    /** Ready while requests can be answered: under `local` and `open` even without Redis (`fallback`); under `closed` only with it. */
    async probe (): Promise<StoreState> {
      try {
        await bounded(() => primary.ping(), adminTimeoutMs, adminTimeoutMs, undefined)
      } catch (err) {
        if (policy === 'closed') throw new StoreUnavailableError(`down: ${message(err).message}`)
        return 'fallback'
      }
      if (!fallbackActive()) return 'ok'
      if (policy === 'closed') throw new StoreUnavailableError('down: limiter store circuit open')
      return 'fallback'
    },
    async close () {
      await Promise.all([primary.close(), fallback.close()])
    },
    ...(primary.maxmemoryPolicy === undefined ? {} : { maxmemoryPolicy: primary.maxmemoryPolicy }),
    errors: () => errors,
    fallbackActive,
    ...(primary.watchBanLifts === undefined ? {} : { watchBanLifts: primary.watchBanLifts })
  }
}
