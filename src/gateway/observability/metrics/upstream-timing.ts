// How long the backend took for one request (until its response headers arrived, or until it failed),
// measured by the proxy and read by the metrics hook and the request log line.
import { performance } from 'node:perf_hooks'
import fp from 'fastify-plugin'

declare module 'fastify' {
  interface FastifyRequest {
    /** performance.now() when the request left for the backend; -1 when it never did. */
    upstreamStartedAt: number
    /** Milliseconds the backend took; -1 when it was not called. */
    upstreamMs: number
  }
}

interface Timed { upstreamStartedAt: number, upstreamMs: number }

export function startUpstreamTimer (request: Timed): void {
  request.upstreamStartedAt = performance.now()
}

export function stopUpstreamTimer (request: Timed): void {
  if (request.upstreamStartedAt >= 0) request.upstreamMs = performance.now() - request.upstreamStartedAt
}

export const upstreamTimingPlugin = fp(async function upstreamTimingPlugin (app) {
  app.decorateRequest('upstreamStartedAt', -1)
  app.decorateRequest('upstreamMs', -1)
}, { name: 'gateway-upstream-timing' })
