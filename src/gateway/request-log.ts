// One JSON log line per request (Fastify's own two request lines are off): who, which route,
// what status, how long, how long the backend took, what the limiter decided, and whether the route
// is deprecated (so ops can find who still calls it). Never the Authorization header or any key
// material: only the key id.
import fp from 'fastify-plugin'
import type { FastifyRequest } from 'fastify'

function roundMs (ms: number): number {
  return Math.round(ms * 1000) / 1000
}

function limiterDecision (request: FastifyRequest): { outcome: string, policy: string, remaining: number } | undefined {
  const decision = request.rateLimit
  if (!decision) return undefined
  return { outcome: decision.outcome, policy: decision.policy, remaining: decision.remaining }
}

export const LOG_REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["proxy-authorization"]',
  'headers.authorization',
  'authorization'
]

export const requestLogPlugin = fp(async function requestLogPlugin (app) {
  app.addHook('onResponse', function logRequest (request, reply, done) {
    request.log.info({
      consumerId: request.consumer?.consumerId ?? null,
      keyId: request.consumer?.id ?? null,
      plan: request.consumer?.plan ?? 'anonymous',
      method: request.method,
      route: request.routeOptions.url ?? 'unmatched',
      status: reply.statusCode,
      durationMs: roundMs(reply.elapsedTime),
      upstreamMs: request.upstreamMs >= 0 ? roundMs(request.upstreamMs) : null,
      rateLimit: limiterDecision(request),
      deprecated: request.lifecycle?.deprecated === true ? true : undefined
    }, 'request')
    done()
  })
}, { name: 'gateway-request-log', dependencies: ['gateway-authenticate'] })
