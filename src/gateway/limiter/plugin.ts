// The limiter in the request pipeline (after authenticate, before requireKey): onRequest counts
// every request against its consumer, or its client address under the anonymous policy, and answers
// 429 over a limit or during a ban; onSend puts the rate-limit headers on every public response.
// It supplies the store metrics their status (app.limiterStatus) and readiness the store's.
import fp from 'fastify-plugin'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { BanPolicy, Limits } from '../config/types.js'
import type { LimiterStatus } from '../observability/metrics/limiter-status.js'
import type { ReadinessRegistry } from '../runtime/readiness.js'
import { gatewayErrors } from '../../interface/errors.js'
import { createBanCache, DEFAULT_BAN_CACHE_SIZE } from './ban-cache.js'
import { createBanCount } from './ban-count.js'
import { ANONYMOUS_ID_PREFIX } from '../edge/client-address.js'
import { limiterId } from './consumer-id.js'
import { createStore, type StoreSettings } from './create-store.js'
import { ANONYMOUS_PLAN } from '../../shared/labels.js'
import { bannedDecision, decide, unavailableHeaders } from './decide.js'
import type { DecisionRecorder, RateLimitDecision } from './decision.js'
import { setRateLimitHeaders } from './headers.js'
import { askOf, type BanEntry, type ConsumeResult, type LimiterStore } from './store.js'
import { routeCost } from './route-cost.js'
import { evictionWarning } from './store-health.js'
import { createMemoryStore } from './memory/store.js'

/** A ready store (the gateway closes it), or settings to create one; neither: the in-process store. */
export interface LimiterOptions { store?: LimiterStore, settings?: StoreSettings }

/** Where the store's readiness check is registered; who is told each decision about a consumer (history/plugin.ts). */
export interface LimiterPluginOptions extends LimiterOptions { readiness: ReadinessRegistry, recorder?: DecisionRecorder | undefined }

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
    limiterStatus: LimiterStatus
  }
}

/** The store the options give, the one their settings select, or the in-process store. */
async function storeOf (app: FastifyInstance, opts: LimiterOptions): Promise<LimiterStore> {
  if (opts.store !== undefined) return opts.store
  if (opts.settings === undefined) return createMemoryStore({ now: app.clock })
  return await createStore(opts.settings, {
    now: app.clock,
    onError: (err) => app.log.warn({ err: err.message }, 'limiter store error'),
    onShardChange (shard, state, reason) {
      const where = shard === '' ? 'redis' : shard
      if (state === 'down') app.log.error({ shard: where, reason }, 'limiter store down: STORE_ON_ERROR answers what units already counted cannot')
      else if (state === 'up') app.log.info({ shard: where, reason }, 'limiter store up: counting in Redis')
    }
  })
}

export const limiterPlugin = fp<LimiterPluginOptions>(async function limiterPlugin (app, opts) {
  const now = app.clock
  const recorder = opts.recorder
  const store = await storeOf(app, opts)
  const health = store.health
  const bans = createBanCache(now, DEFAULT_BAN_CACHE_SIZE)
  store.admin.watchLifts((id) => { bans.forget(id) })
  const warning = evictionWarning(await health.maxmemoryPolicy())
  if (warning !== undefined) app.log.warn({ store: store.describe() }, warning)
  const banCount = createBanCount(() => store.admin.listBans())

  /** Drops `id`'s cached ban, then runs `op` on the store; the ban count follows. */
  const unban = (op: (id: string) => Promise<boolean>) => async (id: string): Promise<boolean> => {
    bans.forget(id)
    try {
      return await op(id)
    } finally {
      banCount.refreshSoon()
    }
  }
  app.decorate('limiter', { store, listBans: () => store.admin.listBans(), liftBan: unban((id) => store.admin.liftBan(id)), reset: unban((id) => store.admin.reset(id)) })
  app.decorate('limiterStatus', {
    storeErrors: () => health.errors(),
    fallbackActive: () => health.fallbackActive(),
    outageAdmissions: () => health.outageAdmissions(),
    bannedKeys: () => banCount.value()
  })
  app.decorateRequest('rateLimit', null)
  // Contacts the store for real: resolves `ok` or `fallback`, rejects when it cannot answer requests.
  opts.readiness.register('store', async () => ({ ...store.describe(), state: await health.probe(), ...(warning === undefined ? {} : { warning }) }))
  app.addHook('onClose', async () => {
    banCount.close()
    await store.close()
  })

  app.addHook('onRequest', async function limitRequest (request: FastifyRequest) {
    const consumer = request.consumer
    // The public documents are outside the anonymous limit, so failed keys' 401s never cost a newcomer
    // the docs page (bounded by the connection caps and load shedding: docs/decisions.md §1).
    if (consumer === null && request.routeOptions.config.public === true) return
    const id = limiterId(consumer, request.ip, request.snapshot.anonymous.ipv6Prefix)
    const limits: Limits = consumer === null ? request.snapshot.anonymous : consumer.limits
    const policy = consumer === null ? ANONYMOUS_PLAN : consumer.plan
    const cost = routeCost(request.snapshot, request.routeOptions.url, request.method)
    request.rateLimit = await decision(id, consumer === null ? null : request.snapshot.ban, limits, policy, cost)
    const decided = request.rateLimit
    if (consumer !== null) recorder?.note(consumer, decided)
    if (decided.outcome === 'key_banned') throw gatewayErrors.keyBanned(decided.retryAfter ?? 1)
    if (decided.outcome === 'quota_exceeded') throw gatewayErrors.quotaExceeded(decided.retryAfter ?? 1)
    if (!decided.allowed) throw gatewayErrors.rateLimited(decided.retryAfter ?? 1, decided.rejectedBy ?? decided.window)
  })

  /** A ban this process remembers (never an anonymous client's: no ban policy), else the store's answer. */
  async function decision (id: string, ban: BanPolicy | null, limits: Limits, policy: string, cost: number): Promise<RateLimitDecision> {
    const cachedUntil = ban === null ? undefined : bans.get(id)
    if (cachedUntil !== undefined) return bannedDecision(cachedUntil, now(), limits, policy, false, 'ban-cache', cost)
    let result: ConsumeResult
    try {
      result = await store.consume(id, askOf(limits, ban, cost))
    } catch (err) {
      // Only the Redis store rejects: while Redis does not answer and STORE_ON_ERROR leaves nothing to admit from.
      // Logged with why (what sent it to the outage policy, the shard's state, what was left): info, not warn — an
      // outage under STORE_ON_ERROR=strict or closed refuses every request, and the shard's change is logged at error.
      app.log.info({ limiterId: id.startsWith(ANONYMOUS_ID_PREFIX) ? undefined : id, reason: (err as Error).message }, 'limiter refused: store unavailable')
      throw gatewayErrors.limiterUnavailable(unavailableHeaders(limits, now()))
    }
    if (result.outcome !== 'key_banned' && result.outcome !== 'ban_started') return decide(result, limits, policy, cost)
    bans.remember(id, result)
    if (result.outcome === 'ban_started') banCount.refreshSoon()
    return bannedDecision(result.bannedUntil, result.now, limits, policy, result.outcome === 'ban_started', result.via, cost)
  }

  app.addHook('onSend', function rateLimitHeaders (request, reply, payload, done) {
    if (request.rateLimit !== null) setRateLimitHeaders(reply, request.rateLimit)
    done(null, payload)
  })
}, { name: 'gateway-limiter', dependencies: ['gateway-clock', 'gateway-authenticate', 'gateway-config'] })
