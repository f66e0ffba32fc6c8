// The limiter in the request pipeline (after authenticate, before requireKey): counts every request
// against its key, or against the client IP under the anonymous policy, answers 429 over a limit or
// during a ban, and puts the rate-limit headers on every response the public port sends. Bans are
// cached in-process until they end (a banned flood costs the store nothing); a lift anywhere reaches
// every process through the store's `watchBanLifts`.
import fp from 'fastify-plugin'
import { LRUCache } from 'lru-cache'
import type { FastifyRequest } from 'fastify'
import type { BanPolicy, Limits } from '../config/types.js'
import { anonymousClientKey } from '../edge/client-address.js'
import { gatewayErrors } from '../errors.js'
import { createStore, type StoreSettings } from './create-store.js'
import type { RateLimitDecision, WindowName } from './decision.js'
import { policyField, setRateLimitHeaders } from './headers.js'
import type { BanEntry, ConsumeResult, LimiterStore } from './store.js'
import { createMemoryStore } from './stores/memory.js'
import { StoreUnavailableError } from './stores/resilient.js'

/** Bans cached per process (each until its end); beyond this, the least recent is asked again. */
export const DEFAULT_BAN_CACHE_SIZE = 10_000
/** STORE_ON_ERROR=closed: the 503's Retry-After and reset, in seconds. */
export const DEFAULT_UNAVAILABLE_RETRY_SECONDS = 1
export const ANONYMOUS_POLICY = 'anonymous'
const ANONYMOUS_PREFIX = 'ip:'

export interface LimiterOptions {
  /** A ready store (the gateway closes it), or settings to create one; neither: in-process store. */
  store?: LimiterStore
  settings?: StoreSettings
  /** Clock of the ban cache (and of the default in-process store). */
  now?: () => number
}

export interface Limiter {
  readonly store: LimiterStore
  /** Bans in force in the shared store. */
  listBans: () => Promise<BanEntry[]>
  /** Lifts a ban in the store and in this process's cache; the store tells every other process (watchBanLifts). */
  liftBan: (id: string) => Promise<boolean>
  /** Forgets `id`'s windows, ban and escalation in the store and this process's ban cache (see LimiterStore.reset). */
  reset: (id: string) => Promise<boolean>
}

declare module 'fastify' {
  interface FastifyInstance {
    limiter: Limiter
  }
}

function secondsUntil (ms: number, now: number): number {
  return Math.max(1, Math.ceil((ms - now) / 1000))
}

function decide (result: ConsumeResult, limits: Limits, policy: string): RateLimitDecision {
  const minuteLeft = Math.max(0, limits.perMinute - result.minute.count)
  const dayLeft = Math.max(0, limits.perDay - result.day.count)
  const window: WindowName = dayLeft < minuteLeft ? 'day' : 'minute'
  const state = window === 'minute' ? result.minute : result.day
  const reset = Math.ceil(state.resetAt / 1000)
  let retryAfter: number | undefined
  let rejectedBy: WindowName | undefined
  if (result.outcome === 'rate_limited') {
    rejectedBy = result.day.retryAt > result.minute.retryAt ? 'day' : 'minute'
    retryAfter = secondsUntil(Math.max(result.minute.retryAt, result.day.retryAt), result.now)
  }
  return {
    allowed: result.outcome === 'ok',
    outcome: result.outcome === 'ban_started' ? 'key_banned' : result.outcome,
    policy,
    window,
    limit: window === 'minute' ? limits.perMinute : limits.perDay,
    remaining: window === 'minute' ? minuteLeft : dayLeft,
    reset,
    retryAfter,
    banStarted: result.outcome === 'ban_started',
    resetIn: Math.max(0, reset - Math.floor(result.now / 1000)),
    policyField: policyField(limits),
    rejectedBy
  }
}

function bannedDecision (until: number, now: number, limits: Limits, policy: string, banStarted: boolean): RateLimitDecision {
  const retryAfter = secondsUntil(until, now)
  return {
    allowed: false,
    outcome: 'key_banned',
    policy,
    window: 'minute',
    limit: limits.perMinute,
    remaining: 0,
    reset: Math.ceil(until / 1000),
    retryAfter,
    banStarted,
    resetIn: retryAfter,
    policyField: policyField(limits),
    rejectedBy: undefined
  }
}

/** The 503 of STORE_ON_ERROR=closed has no decision behind it: the key's policy, nothing left, retry in 1 s. */
function unavailableHeaders (limits: Limits, now: number): Record<string, string> {
  const retry = DEFAULT_UNAVAILABLE_RETRY_SECONDS
  return {
    'x-ratelimit-limit': String(limits.perMinute),
    'x-ratelimit-remaining': '0',
    'x-ratelimit-reset': String(Math.ceil(now / 1000) + retry),
    'ratelimit-policy': policyField(limits),
    ratelimit: `"minute";r=0;t=${retry}`,
    'retry-after': String(retry)
  }
}

export const limiterPlugin = fp<LimiterOptions>(async function limiterPlugin (app, opts) {
  const now = opts.now ?? Date.now
  const store = opts.store ?? (opts.settings === undefined
    ? createMemoryStore({ now })
    : await createStore(opts.settings, {
      onError: (err) => app.log.warn({ err: err.message }, 'limiter store error'),
      onBreaker: (open) => {
        if (open) app.log.error('limiter store circuit open: the STORE_ON_ERROR policy answers until Redis is back')
        else app.log.info('limiter store circuit closed: counting in Redis again')
      }
    }))
  /** id → Unix ms (this process's clock) when its ban ends; an expired entry is dropped on read. */
  const bans = new LRUCache<string, number>({ max: DEFAULT_BAN_CACHE_SIZE })
  let storeErrors = 0
  store.watchBanLifts?.((id) => {
    if (id === undefined) bans.clear()
    else bans.delete(id)
  })

  function remember (id: string, result: ConsumeResult): void {
    const left = result.bannedUntil - result.now
    if (left > 0) bans.set(id, now() + left)
  }

  function cachedBan (id: string): number | undefined {
    const until = bans.get(id)
    if (until === undefined || until > now()) return until
    bans.delete(id)
    return undefined
  }

  app.decorate('limiter', {
    store,
    listBans: () => store.listBans(),
    async liftBan (id: string) {
      bans.delete(id)
      return await store.liftBan(id)
    },
    async reset (id: string) {
      bans.delete(id)
      return await store.reset(id)
    }
  })
  app.decorate('limiterStatus', {
    storeErrors: () => storeErrors + (store.errors?.() ?? 0),
    fallbackActive: () => store.fallbackActive?.() ?? false,
    bannedKeys: async () => (await store.listBans()).length
  })
  app.decorateRequest('rateLimit', null)
  app.health.checks.set('store', () => store.ping())
  app.addHook('onClose', async () => { await store.close() })

  app.addHook('onRequest', async function limitRequest (request: FastifyRequest) {
    const consumer = request.consumer
    let id: string
    let limits: Limits
    let ban: BanPolicy | null
    let policy: string
    if (consumer === null) {
      id = ANONYMOUS_PREFIX + anonymousClientKey(request.ip, request.snapshot.anonymous.ipv6Prefix)
      limits = request.snapshot.anonymous
      ban = null
      policy = ANONYMOUS_POLICY
    } else {
      id = consumer.consumerId
      limits = consumer.limits
      ban = request.snapshot.ban
      policy = consumer.plan
      const cachedUntil = cachedBan(id)
      if (cachedUntil !== undefined) {
        const decision = bannedDecision(cachedUntil, now(), limits, policy, false)
        request.rateLimit = decision
        throw gatewayErrors.keyBanned(decision.retryAfter ?? 1)
      }
    }
    let result: ConsumeResult
    try {
      result = await store.consume(id, limits, ban)
    } catch (err) {
      // A resilient store has counted and logged its failure already; it throws only under `closed`.
      if (!(err instanceof StoreUnavailableError)) {
        storeErrors++
        request.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'limiter store error')
      }
      throw gatewayErrors.limiterUnavailable(unavailableHeaders(limits, now()))
    }
    if (result.outcome === 'key_banned' || result.outcome === 'ban_started') {
      remember(id, result)
      const decision = bannedDecision(result.bannedUntil, result.now, limits, policy, result.outcome === 'ban_started')
      request.rateLimit = decision
      throw gatewayErrors.keyBanned(decision.retryAfter ?? 1)
    }
    const decision = decide(result, limits, policy)
    request.rateLimit = decision
    if (!decision.allowed) throw gatewayErrors.rateLimited(decision.retryAfter ?? 1, decision.rejectedBy ?? decision.window)
  })

  app.addHook('onSend', function rateLimitHeaders (request, reply, payload, done) {
    if (request.rateLimit !== null) setRateLimitHeaders(reply, request.rateLimit)
    done(null, payload)
  })
}, { name: 'gateway-limiter', dependencies: ['gateway-authenticate', 'gateway-config', 'gateway-health'] })
