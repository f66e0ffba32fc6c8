// One JSON log line per request (Fastify's own two request lines are off): who, which route,
// what status, how long. Never the Authorization header or any key material: only the key id.
import fp from 'fastify-plugin'

export const LOG_REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["proxy-authorization"]',
  'headers.authorization',
  'authorization'
]

export const requestLogPlugin = fp(async function requestLogPlugin (app) {
  app.addHook('onResponse', function logRequest (request, reply, done) {
    request.log.info({
      keyId: request.consumer?.id ?? null,
      plan: request.consumer?.plan ?? 'anonymous',
      method: request.method,
      route: request.routeOptions.url ?? 'unmatched',
      status: reply.statusCode,
      durationMs: Math.round(reply.elapsedTime * 1000) / 1000
    }, 'request')
    done()
  })
}, { name: 'gateway-request-log', dependencies: ['gateway-authenticate'] })
