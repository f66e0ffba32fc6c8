// buildAdmin: the operations side of a gateway on its own port (loopback by default) — /healthz (liveness),
// /readyz, /metrics (the gateway's own registry), and the slot where the admin API attaches. Never
// reachable from the public port; closed to browsers (request-guard.ts: Host, Origin, JSON) and,
// when ADMIN_TOKEN is set, to requests without that bearer token.
import { timingSafeEqual, createHash } from 'node:crypto'
import Fastify, { type FastifyInstance } from 'fastify'
import { adminErrors, installErrorHandling } from '../../interface/errors.js'
import type { ReadinessRegistry } from '../runtime/readiness.js'
import { adminApi } from './api.js'
import { adminFrameworkErrors } from './framework-errors.js'
import { adminHistoryRoutes } from './history-routes.js'
import { adminWebhookRoutes } from './webhook-routes.js'
import { DEFAULT_ADMIN_HOSTS, PROBE_PATHS, refuseCrossOriginWrites, requireAdminHost } from './request-guard.js'

export interface AdminOptions {
  gateway: FastifyInstance
  /** The gateway's readiness registry, which /readyz reports. */
  readiness: ReadinessRegistry
  /** When set, every admin request but /healthz and /readyz must carry `Authorization: Bearer <token>`. */
  token?: string | undefined
  /** Host names the admin app answers besides the loopback ones (ADMIN_HOSTS). */
  hosts?: readonly string[]
}

function digest (value: string): Buffer {
  return createHash('sha256').update(value).digest()
}

/**
 * State-changing requests must say `application/json` (request-guard.ts) but carry no body: an empty
 * one is no body, not a 400, so `curl -X POST -H 'content-type: application/json'` works as is.
 */
function installEmptyJsonParser (app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error')
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'string' }, function parseAdminJson (request, body, done) {
    const text = typeof body === 'string' ? body : body.toString('utf8')
    if (text === '') done(null, undefined)
    else parse(request, text, done)
  })
}

export async function buildAdmin (options: AdminOptions): Promise<FastifyInstance> {
  const app = Fastify({ logger: false, frameworkErrors: adminFrameworkErrors })
  installErrorHandling(app)
  installEmptyJsonParser(app)
  const { gateway } = options

  app.addHook('onRequest', requireAdminHost(options.hosts ?? DEFAULT_ADMIN_HOSTS))
  if (options.token !== undefined) {
    const expected = digest(`Bearer ${options.token}`)
    app.addHook('onRequest', function requireAdminToken (request, _reply, done) {
      // Probes cannot carry a secret header: liveness and readiness stay open, they reveal no key data.
      if (PROBE_PATHS.has(request.url)) { done(); return }
      const given = digest(request.headers.authorization ?? '')
      if (!timingSafeEqual(given, expected)) {
        done(adminErrors.tokenRequired())
        return
      }
      done()
    })
  }
  app.addHook('onRequest', refuseCrossOriginWrites)

  // Liveness: 503 while the gateway is wedged — its event loop stalling, its upstream gate stuck
  // (runtime/liveness.ts) — so that an orchestrator restarts it; /readyz says the same as `serving`.
  app.get('/healthz', async (_request, reply) => {
    const { live, checks } = gateway.liveness.report()
    return reply.code(live ? 200 : 503).send(live ? { status: 'ok' } : { status: 'wedged', checks })
  })
  app.get('/readyz', async (_request, reply) => {
    const report = await options.readiness.report()
    return reply.code(report.ready ? 200 : 503).send({ status: report.ready ? 'ready' : 'not_ready', checks: report.checks })
  })
  await app.register(adminApi, { gateway, identity: options.token === undefined ? 'loopback' : 'admin-token' })
  await app.register(adminHistoryRoutes, { gateway })
  await app.register(adminWebhookRoutes, { gateway, identity: options.token === undefined ? 'loopback' : 'admin-token' })
  app.get('/metrics', async (_request, reply) => {
    const { registry } = gateway.metrics
    return reply.type(registry.contentType).send(await registry.metrics())
  })
  return app
}
