// The admin API ops use on a running gateway (admin port only): what config is in force (never a
// digest), reload it now, list and lift bans, and a key's current window counts.
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { ApiError } from '../../shared/api-error.js'

export interface AdminApiOptions {
  gateway: FastifyInstance
}

const keyIdParams = {
  type: 'object',
  required: ['keyId'],
  properties: { keyId: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' } }
} as const

function iso (ms: number): string {
  return new Date(ms).toISOString()
}

export const adminApi = fp<AdminApiOptions>(async function adminApi (app, { gateway }) {
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
      routes: snapshot.routes.length
    }
  })

  app.post('/admin/reload', async (_request, reply) => {
    if (!gateway.hasDecorator('configReloader')) {
      throw new ApiError(409, 'reload_unavailable', 'This gateway runs on a fixed config, not a config directory')
    }
    const result = await gateway.configReloader.reload('admin')
    if (!result.ok) {
      return reply.code(422).send({ code: 'config_rejected', message: result.problems.join('; '), status: 422, problems: result.problems })
    }
    return result
  })

  app.get('/admin/bans', async () => {
    const now = Date.now()
    const bans = await gateway.limiter.listBans()
    return {
      bans: bans
        .sort((a, b) => a.until - b.until)
        .map((b) => ({ keyId: b.id, until: iso(b.until), secondsLeft: Math.max(0, Math.ceil((b.until - now) / 1000)) }))
    }
  })

  app.delete<{ Params: { keyId: string } }>('/admin/bans/:keyId', { schema: { params: keyIdParams } }, async (request) => {
    const lifted = await gateway.limiter.liftBan(request.params.keyId)
    if (!lifted) throw new ApiError(404, 'not_found', `Key ${request.params.keyId} is not banned`)
    return { keyId: request.params.keyId, lifted: true }
  })

  app.get<{ Params: { keyId: string } }>('/admin/keys/:keyId/usage', { schema: { params: keyIdParams } }, async (request) => {
    const key = gateway.gatewayConfig.current.keysById.get(request.params.keyId)
    if (key === undefined) throw new ApiError(404, 'not_found', `No key with id ${request.params.keyId}`)
    const usage = await gateway.limiter.store.peek(key.id, key.limits)
    const window = (state: typeof usage.minute, limit: number): Record<string, unknown> => ({
      count: state.count, limit, remaining: Math.max(0, limit - state.count), resetAt: iso(state.resetAt)
    })
    return {
      keyId: key.id,
      plan: key.plan,
      disabled: key.disabled,
      minute: window(usage.minute, key.limits.perMinute),
      day: window(usage.day, key.limits.perDay),
      bannedUntil: usage.bannedUntil > usage.now ? iso(usage.bannedUntil) : null
    }
  })
}, { name: 'gateway-admin-api' })
