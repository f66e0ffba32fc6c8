// The admin API ops use on a running gateway (admin port only): what config is in force (never a
// digest), reload it now, list and lift bans, a consumer's credentials, usage (the calendar month
// against its quota included) and ban state, and a consumer reset after an incident. The limiter counts per consumer, so every id a route takes may
// name a consumer or one of its credentials; state-changing calls write an audit log line.
import type { FastifyInstance, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { adminErrors } from '../../interface/errors.js'
import type { Limits } from '../config/types.js'
import { askOf, type ConsumeResult } from '../limiter/store.js'
import { resolveConsumer, type Consumer } from './consumers.js'

export interface AdminApiOptions {
  gateway: FastifyInstance
  /** Who an admin request acts as, for the audit log: `admin-token` when ADMIN_TOKEN guards the port, else `loopback`. */
  identity?: string
}

const keyIdParams = {
  type: 'object',
  required: ['keyId'],
  properties: { keyId: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' } }
} as const

const consumerParams = {
  type: 'object',
  required: ['id'],
  properties: { id: keyIdParams.properties.keyId }
} as const

function iso (ms: number): string {
  return new Date(ms).toISOString()
}

function secondsLeft (until: number, now: number): number {
  return Math.max(0, Math.ceil((until - now) / 1000))
}

function windowView (state: ConsumeResult['minute'], limit: number): Record<string, unknown> {
  return { count: state.count, limit, remaining: Math.max(0, limit - state.count), resetAt: iso(state.resetAt) }
}

/**
 * The calendar month (UTC) as the limiter counts it, when a month applies: units against the quota
 * (and the overage past it on a plan with overage: allow), or only counted for a shadow perMonth
 * being rehearsed (no limit); null when neither.
 */
function monthView (usage: ConsumeResult, limits: Limits): Record<string, unknown> | null {
  const month = usage.month
  if (month === undefined) return null
  const limit = limits.perMonth
  return {
    count: month.count,
    limit: limit ?? null,
    remaining: limit === undefined ? null : Math.max(0, limit - month.count),
    resetAt: iso(month.resetAt),
    overageAllowed: limits.overage === true,
    overage: limit === undefined || limits.overage !== true ? 0 : Math.max(0, month.count - limit),
    shadow: limits.shadow?.perMonth ?? null
  }
}

function banView (usage: ConsumeResult, escalationLevel: number): Record<string, unknown> {
  const banned = usage.bannedUntil > usage.now
  return {
    until: banned ? iso(usage.bannedUntil) : null,
    secondsLeft: banned ? secondsLeft(usage.bannedUntil, usage.now) : 0,
    escalationLevel: escalationLevel < 0 ? null : escalationLevel
  }
}

export const adminApi = fp<AdminApiOptions>(async function adminApi (app, { gateway, identity = 'loopback' }) {
  function consumerOf (id: string): Consumer {
    const consumer = resolveConsumer(gateway.gatewayConfig.current, id)
    if (consumer === undefined) throw adminErrors.consumerNotFound(id)
    return consumer
  }

  /** The limiter's id for a ban route's `keyId`: its consumer when it is a credential, else as given (a key already removed from keys.yaml). */
  function limiterIdOf (id: string): string {
    return resolveConsumer(gateway.gatewayConfig.current, id)?.id ?? id
  }

  /**
   * Every call of an admin route to the limiter's store goes through here: a store that fails or does
   * not answer (Redis frozen, down, its breaker open) is `503 unavailable` in the Error shape, never a
   * 500 — the admin reads all answer alike (docs/operations.md, the admin API).
   */
  async function fromStore<T> (call: () => Promise<T>): Promise<T> {
    try {
      return await call()
    } catch (err) {
      gateway.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'admin: limiter store call failed')
      throw adminErrors.storeNoAnswer()
    }
  }

  function audit (request: FastifyRequest, msg: string, fields: Record<string, unknown>): void {
    gateway.log.info({ audit: true, ...fields, who: identity, client: request.ip, at: iso(Date.now()) }, msg)
  }

  app.get('/admin/config', async () => {
    const snapshot = gateway.gatewayConfig.current
    const byPlan: Record<string, number> = {}
    let disabled = 0
    for (const key of snapshot.keysById.values()) {
      byPlan[key.plan] = (byPlan[key.plan] ?? 0) + 1
      if (key.disabled) disabled++
    }
    return {
      version: snapshot.version,
      loadedAt: iso(snapshot.loadedAt),
      configDir: gateway.hasDecorator('configReloader') ? gateway.configReloader.dir : null,
      plans: Object.fromEntries([...snapshot.plans].map(([name, limits]) => [name, limits ?? 'custom'])),
      anonymous: snapshot.anonymous,
      ban: snapshot.ban,
      keys: { total: snapshot.keysById.size, disabled, byPlan },
      routes: snapshot.routes.length,
      // What a request of each route spends when it is not 1 (routes.yaml `cost`): `plans diff` compares them.
      costs: Object.fromEntries(snapshot.routes.filter((r) => r.cost !== 1).map((r) => [`${r.method} ${r.path}`, r.cost]))
    }
  })

  app.post('/admin/reload', async (_request, reply) => {
    if (!gateway.hasDecorator('configReloader')) {
      throw adminErrors.reloadUnavailable()
    }
    const result = await gateway.configReloader.reload('admin')
    if (!result.ok) {
      return reply.code(422).send({ code: 'config_rejected', message: result.problems.join('; '), status: 422, problems: result.problems })
    }
    return result
  })

  app.get('/admin/bans', async () => {
    const now = gateway.clock()
    const bans = await fromStore(() => gateway.limiter.listBans())
    return {
      // Bans belong to consumers; `keyId` stays for existing clients and holds the same id.
      bans: bans
        .sort((a, b) => a.until - b.until)
        .map((b) => ({ keyId: b.id, consumerId: b.id, until: iso(b.until), secondsLeft: secondsLeft(b.until, now) }))
    }
  })

  app.delete<{ Params: { keyId: string } }>('/admin/bans/:keyId', { schema: { params: keyIdParams } }, async (request) => {
    const consumerId = limiterIdOf(request.params.keyId)
    const lifted = await fromStore(() => gateway.limiter.liftBan(consumerId))
    if (!lifted) throw adminErrors.keyNotBanned(request.params.keyId)
    audit(request, 'ban lifted', { consumerId })
    return { keyId: request.params.keyId, consumerId, lifted: true }
  })

  app.get<{ Params: { keyId: string } }>('/admin/keys/:keyId/usage', { schema: { params: keyIdParams } }, async (request) => {
    const key = gateway.gatewayConfig.current.keysById.get(request.params.keyId)
    if (key === undefined) throw adminErrors.keyNotFound(request.params.keyId)
    const usage = await fromStore(() => gateway.limiter.store.peek(key.consumerId, askOf(key.limits)))
    return {
      keyId: key.id,
      consumerId: key.consumerId,
      plan: key.plan,
      disabled: key.disabled,
      minute: windowView(usage.minute, key.limits.perMinute),
      day: windowView(usage.day, key.limits.perDay),
      month: monthView(usage, key.limits),
      bannedUntil: usage.bannedUntil > usage.now ? iso(usage.bannedUntil) : null
    }
  })

  app.get<{ Params: { id: string } }>('/admin/consumers/:id', { schema: { params: consumerParams } }, async (request) => {
    const consumer = consumerOf(request.params.id)
    const first = consumer.credentials[0]!
    const now = gateway.clock()
    const [usage, level] = await fromStore(async () => await Promise.all([
      gateway.limiter.store.peek(consumer.id, askOf(first.limits)),
      gateway.limiter.store.admin.escalationLevel(consumer.id)
    ]))
    return {
      consumerId: consumer.id,
      plan: first.plan,
      limits: first.limits,
      credentials: consumer.credentials.map((key) => ({
        id: key.id,
        scopes: key.scopes,
        expiresAt: key.expiresAt === undefined ? null : iso(key.expiresAt),
        expired: key.expiresAt !== undefined && key.expiresAt <= now,
        disabled: key.disabled
      })),
      usage: {
        minute: windowView(usage.minute, first.limits.perMinute),
        day: windowView(usage.day, first.limits.perDay),
        month: monthView(usage, first.limits)
      },
      ban: banView(usage, level)
    }
  })

  app.post<{ Params: { id: string } }>('/admin/consumers/:id/reset', { schema: { params: consumerParams } }, async (request) => {
    const consumer = consumerOf(request.params.id)
    const limits = consumer.credentials[0]!.limits
    // What is about to go, for the answer and the audit line; a request landing in between is cleared too.
    const [usage, level] = await fromStore(async () => await Promise.all([
      gateway.limiter.store.peek(consumer.id, askOf(limits)),
      gateway.limiter.store.admin.escalationLevel(consumer.id)
    ]))
    await fromStore(() => gateway.limiter.reset(consumer.id))
    // The month's units go too: a reset gives the consumer its whole monthly quota back.
    const cleared = { minute: usage.minute.count, day: usage.day.count, month: usage.month?.count ?? null, ban: banView(usage, level) }
    audit(request, 'consumer reset', { consumerId: consumer.id, cleared })
    return { consumerId: consumer.id, reset: true, cleared }
  })
}, { name: 'gateway-admin-api' })
