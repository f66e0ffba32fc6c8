// Feeds the gateway's metrics from one onResponse hook per request, and hands the registry to the
// admin app (GET /metrics is served there only, never on the public port). The limiter's metrics
// read `request.rateLimit` and `app.limiterStatus` (the shape of limiter-status.ts, supplied by the
// limiter plugin) when a limiter is registered, and stay at 0 when not.
import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { countByPlan } from '../../history/quota-watch.js'
import { routeUrlOf } from '../route-url.js'
import { ANONYMOUS_PLAN } from '../../../shared/labels.js'
import type { LimiterStatus } from './limiter-status.js'
import { createGatewayMetrics, type GatewayMetrics, type SheddingStatus } from './registry.js'

declare module 'fastify' {
  interface FastifyInstance {
    metrics: GatewayMetrics
  }
}

export interface MetricsPluginOptions {
  /** false: no per-request recording and no process metrics (the bench's baseline); the registry still exists. */
  enabled?: boolean | undefined
  /** Log lines the logger's destination lost, read at scrape time; absent: 0. */
  logLinesDropped?: (() => number) | undefined
}

function limiterStatusOf (app: FastifyInstance): () => LimiterStatus | undefined {
  return () => app.hasDecorator('limiterStatus') ? app.limiterStatus : undefined
}

/** Load shedding's and the upstream gate's counts, read at scrape time: the proxy registers after the metrics. */
function sheddingOf (app: FastifyInstance): SheddingStatus {
  const upstream = (): FastifyInstance['upstream'] | undefined => app.hasDecorator('upstream') ? app.upstream : undefined
  return {
    shed () {
      const gate = upstream()?.shed
      const edge = app.hasDecorator('loadShedding') ? app.loadShedding.shed : 0
      return { overload: edge, upstream_queue_full: gate?.queue_full ?? 0, upstream_budget: gate?.budget ?? 0 }
    },
    queueDelays () {
      return app.hasDecorator('loadShedding') ? app.loadShedding.delays : undefined
    },
    concurrency () {
      // The shutdown plugin counts every request in flight, shed or not, load shedding on or off.
      return {
        inFlight: app.hasDecorator('drain') ? app.drain.inFlight : 0,
        limit: app.hasDecorator('loadShedding') ? app.loadShedding.limit : 0
      }
    },
    upstream () {
      const gate = upstream()
      return gate === undefined ? undefined : { inFlight: gate.inFlight, queued: gate.queued }
    }
  }
}

export const metricsPlugin = fp<MetricsPluginOptions>(async function metricsPlugin (app, opts) {
  const enabled = opts.enabled !== false
  const snapshot = app.gatewayConfig.current
  const metrics = createGatewayMetrics({
    plans: snapshot.plans.keys(),
    deprecatedRoutes: snapshot.routes.filter((r) => r.deprecated !== undefined).map((r) => r.path),
    limiterStatus: limiterStatusOf(app),
    keyExpiry: { snapshot: () => app.gatewayConfig.current, now: () => app.clock() },
    traceSpans: () => app.hasDecorator('tracing') ? app.tracing.counts : undefined,
    shedding: sheddingOf(app),
    quotaNearLimit: () => app.hasDecorator('history') ? countByPlan(app.history.nearLimit(app.clock())) : undefined,
    logLinesDropped: opts.logLinesDropped,
    defaultMetrics: enabled
  })
  app.decorate('metrics', metrics)
  if (!enabled) return

  app.addHook('onResponse', function recordRequest (request, reply, done) {
    const route = routeUrlOf(request)
    const plan = request.consumer?.plan ?? ANONYMOUS_PLAN
    metrics.requests.count(route, request.method, plan, reply.statusCode)
    metrics.requestDuration.observe(route, reply.elapsedTime / 1000)
    if (request.upstreamMs >= 0) metrics.upstreamDuration.observe(route, request.upstreamMs / 1000)
    if (request.lifecycle?.deprecated === true) metrics.deprecatedRequests.inc({ route, plan })
    const decision = request.rateLimit
    if (decision?.shadowRejectedBy !== undefined) metrics.shadowRejections.inc({ plan: decision.policy, window: decision.shadowRejectedBy })
    if (decision !== null && decision.overageUnits > 0) metrics.quotaOverage.inc({ plan: decision.policy }, decision.overageUnits)
    if (decision && decision.outcome !== 'ok') {
      // window="month" is every quota_exceeded (the month used up), whichever full window frees last.
      const window = decision.outcome === 'key_banned' ? 'ban' : decision.outcome === 'quota_exceeded' ? 'month' : decision.rejectedBy ?? decision.window
      metrics.rateLimitRejections.inc({ plan: decision.policy, window })
      if (decision.banStarted) metrics.bans.inc({ plan: decision.policy })
    }
    done()
  })
}, { name: 'gateway-metrics', dependencies: ['gateway-config', 'gateway-authenticate'] })
