// The admin API's reads of the history (history/plugin.ts): a consumer's usage per UTC day (requests
// admitted and rejected, units spent, overage units) with the totals of the months those days are in,
// the consumers a plan's shadow limits would have rejected in the last 24 h, and the consumers near
// their monthly quota (this process's quota watch: what gateway_quota_consumers_near_limit counts). Both flush this process's
// counts first, so the answer is never behind its own traffic; other processes' counts arrive with
// their next flush. `scope` says whether the answer is every gateway's (Redis) or this process's.
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { adminErrors, requestErrors, type ApiError } from '../../interface/errors.js'
import { dayOf, HOUR_MS, hourOf, isoDay, isoMonth, monthOf, parseIsoDay } from '../history/days.js'
import { NEAR_LIMIT_RECENT_MS, NEAR_LIMIT_SHARE } from '../history/quota-watch.js'
import { SHADOW_KEEP_PER_HOUR, SHADOW_WINDOW_HOURS, USAGE_HISTORY_DAYS } from '../history/store.js'
import { resolveConsumer } from './consumers.js'

/** Consumers listed by `GET /admin/plans/:plan/shadow` unless `top` says otherwise. */
export const DEFAULT_SHADOW_TOP = 20
/** The most a read lists: what an hour's records keep. */
export const MAX_SHADOW_TOP = SHADOW_KEEP_PER_HOUR

const ID_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'

const usageSchema = {
  params: { type: 'object', required: ['id'], properties: { id: { type: 'string', pattern: ID_PATTERN } } },
  querystring: { type: 'object', additionalProperties: false, properties: { from: { type: 'string' }, to: { type: 'string' } } }
} as const

const shadowSchema = {
  params: { type: 'object', required: ['plan'], properties: { plan: { type: 'string', maxLength: 64 } } },
  querystring: { type: 'object', additionalProperties: false, properties: { top: { type: 'integer', minimum: 1, maximum: MAX_SHADOW_TOP } } }
} as const

const SCOPE_NOTES = {
  shared: 'every gateway process on this Redis',
  process: 'this gateway process only, since it started (in-process limiter store)'
} as const

function invalid (message: string): ApiError {
  return requestErrors.invalidParameter(message)
}

/** A `from`/`to` date: YYYY-MM-DD of a real UTC day. */
function dayParameter (name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback
  const day = parseIsoDay(text)
  if (day === undefined) throw invalid(`${name} must be a UTC date YYYY-MM-DD, got "${text}"`)
  return day
}

function iso (ms: number): string {
  return new Date(ms).toISOString()
}

export const adminHistoryRoutes = fp<{ gateway: FastifyInstance }>(async function adminHistoryRoutes (app, { gateway }) {
  async function fromHistory<T> (call: () => Promise<T>): Promise<T> {
    try {
      await gateway.history.flush()
      return await call()
    } catch (err) {
      gateway.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'admin: history store call failed')
      throw adminErrors.historyNoAnswer()
    }
  }

  app.get<{ Params: { id: string }, Querystring: { from?: string, to?: string } }>('/admin/consumers/:id/usage', { schema: usageSchema }, async (request) => {
    const consumer = resolveConsumer(gateway.gatewayConfig.current, request.params.id)
    if (consumer === undefined) throw adminErrors.consumerNotFound(request.params.id)
    const today = dayOf(gateway.clock())
    const oldest = today - USAGE_HISTORY_DAYS + 1
    const to = dayParameter('to', request.query.to, today)
    const from = dayParameter('from', request.query.from, Math.max(oldest, to - USAGE_HISTORY_DAYS + 1))
    if (to > today) throw invalid(`to (${isoDay(to)}) is after today (${isoDay(today)}, UTC)`)
    if (from > to) throw invalid(`from (${isoDay(from)}) is after to (${isoDay(to)})`)
    if (from < oldest) throw invalid(`the usage history keeps the last ${USAGE_HISTORY_DAYS} days: from must be ${isoDay(oldest)} or later, got ${isoDay(from)}`)
    // Every month the range touches (35 days can touch three).
    const monthNames = [...new Set(Array.from({ length: to - from + 1 }, (_, i) => monthOf(from + i).month))]
    const [days, months] = await fromHistory(async () => await Promise.all([
      gateway.history.store.usage(consumer.id, from, to),
      gateway.history.store.months(consumer.id, monthNames)
    ]))
    const scope = gateway.history.store.scope
    const total = { admitted: 0, units: 0, rejected: 0, total: 0, overage: 0 }
    for (const day of days) {
      total.admitted += day.admitted
      total.units += day.units
      total.rejected += day.rejected
      total.total += day.admitted + day.rejected
      total.overage += day.overage
    }
    const limits = consumer.credentials[0]?.limits
    return {
      consumerId: consumer.id,
      plan: consumer.credentials[0]?.plan,
      scope,
      counts: SCOPE_NOTES[scope],
      from: isoDay(from),
      to: isoDay(to),
      // `units`: what the admitted requests spent (a route's cost, routes.yaml); `overage`: units past the month's quota (overage: allow).
      days: days.map((d) => ({ date: isoDay(d.day), admitted: d.admitted, units: d.units, rejected: d.rejected, total: d.admitted + d.rejected, overage: d.overage })),
      total,
      // Each month the range touches, every day of it (not only the days asked for); the consumer's quota now.
      months: months.map((m) => ({ month: isoMonth(m.month), units: m.units, overage: m.overage })),
      perMonth: limits?.perMonth ?? null,
      overageAllowed: limits?.overage === true
    }
  })

  app.get('/admin/quotas/near-limit', async () => {
    const now = gateway.clock()
    const near = gateway.history.nearLimit(now)
    return {
      // Consumers this process decided; another gateway process may know others.
      scope: 'process',
      share: NEAR_LIMIT_SHARE,
      decidedSince: iso(now - NEAR_LIMIT_RECENT_MS),
      consumers: near.map((c) => ({
        consumerId: c.consumerId,
        plan: c.plan,
        month: isoMonth(c.month),
        units: c.units,
        perMonth: c.quota,
        share: Math.floor(c.units * 1000 / c.quota) / 1000,
        lastDecision: iso(c.last)
      }))
    }
  })

  app.get<{ Params: { plan: string }, Querystring: { top?: number } }>('/admin/plans/:plan/shadow', { schema: shadowSchema }, async (request) => {
    const { plan } = request.params
    const snapshot = gateway.gatewayConfig.current
    if (!snapshot.plans.has(plan)) throw adminErrors.planNotFound(plan, [...snapshot.plans.keys()])
    const now = gateway.clock()
    const toHour = hourOf(now)
    const fromHour = toHour - SHADOW_WINDOW_HOURS
    const summary = await fromHistory(() => gateway.history.store.shadow(plan, fromHour, toHour, request.query.top ?? DEFAULT_SHADOW_TOP))
    const scope = gateway.history.store.scope
    const limits = snapshot.plans.get(plan)
    return {
      plan,
      limits: limits ?? 'custom',
      shadow: limits?.shadow ?? null,
      scope,
      counts: SCOPE_NOTES[scope],
      since: iso(fromHour * HOUR_MS),
      until: iso(now),
      consumers: summary.consumers,
      rejections: summary.rejections,
      complete: summary.complete,
      untracked: summary.untracked,
      top: summary.top.map((r) => ({
        consumerId: r.consumerId,
        rejections: r.rejections,
        admitted: r.admitted,
        first: iso(r.first),
        last: iso(r.last)
      }))
    }
  })
}, { name: 'gateway-admin-history' })
