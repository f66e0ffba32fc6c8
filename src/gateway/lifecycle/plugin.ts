// Endpoint lifecycle from routes.yaml (docs/decisions.md §4): deprecation and sunset headers, the 410 after
// the sunset instant (answered here, so the backend is never called), and stability marks.
// Registered after requireKey: 401 and 429 come first, and carry no lifecycle headers.
import fp from 'fastify-plugin'
import { gatewayErrors } from '../../interface/errors.js'
import { UNMATCHED_ROUTE } from '../../shared/labels.js'
import { routeUrlOf } from '../observability/route-url.js'
import { findLifecycleEntry, lifecycleIndex, mergeLink, type LifecycleEntry } from './rules.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The lifecycle rule of the matched route, once the lifecycle hook ran; null otherwise. */
    lifecycle: LifecycleEntry | null
  }
}

export const lifecyclePlugin = fp(async function lifecyclePlugin (app) {
  app.decorateRequest('lifecycle', null)

  app.addHook('onRequest', function applyLifecycle (request, reply, done) {
    const url = routeUrlOf(request)
    if (url === UNMATCHED_ROUTE) { done(); return }
    const entry = findLifecycleEntry(lifecycleIndex(request.snapshot), url, request.method)
    if (entry === undefined) { done(); return }
    request.lifecycle = entry
    reply.headers(entry.headers)
    if (entry.sunset !== undefined && app.clock() >= entry.sunset) {
      done(gatewayErrors.endpointRemoved(entry.rule.method, entry.rule.path, entry.rule.deprecated?.successor))
      return
    }
    done()
  })

  // In onSend, after the proxy copied the backend's headers, so a backend Link (rel="next") and ours coexist.
  app.addHook('onSend', function addSuccessorLink (request, reply, payload, done) {
    const link = request.lifecycle?.link
    if (link !== undefined) reply.header('link', mergeLink(reply.getHeader('link'), link))
    done(null, payload)
  })

  app.addHook('onReady', function describeLifecycle (done) {
    const routes = app.gatewayConfig.current.routes
    for (const rule of routes) {
      if (!app.hasRoute({ method: rule.method, url: rule.path })) {
        app.log.warn({ method: rule.method, path: rule.path }, 'routes.yaml names a route the gateway does not serve; its rule has no effect')
      }
    }
    app.log.info({
      deprecated: routes.filter((r) => r.deprecated !== undefined).map((r) => `${r.method} ${r.path}`),
      stability: Object.fromEntries(routes.filter((r) => r.stability !== undefined).map((r) => [`${r.method} ${r.path}`, r.stability]))
    }, 'endpoint lifecycle rules')
    done()
  })
}, { name: 'gateway-lifecycle', dependencies: ['gateway-config', 'gateway-clock', 'gateway-require-key'] })
