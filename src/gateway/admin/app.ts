// buildAdmin: the operations side of a gateway on its own port (loopback by default) — /healthz,
// /readyz, /metrics (the gateway's own registry), and the slot where the admin API attaches. Never
// reachable from the public port, and, when ADMIN_TOKEN is set, closed to requests without that
// bearer token.
import { timingSafeEqual, createHash } from 'node:crypto'
import Fastify, { type FastifyInstance } from 'fastify'
import { adminErrors, installErrorHandling } from '../../interface/errors.js'
import type { ReadinessRegistry } from '../runtime/readiness.js'
import { adminApi } from './api.js'

export interface AdminOptions {
  gateway: FastifyInstance
  /** The gateway's readiness registry, which /readyz reports. */
  readiness: ReadinessRegistry
  /** When set, every admin request but /healthz and /readyz must carry `Authorization: Bearer <token>`. */
  token?: string | undefined
}

function digest (value: string): Buffer {
  return createHash('sha256').update(value).digest()
}

export async function buildAdmin (options: AdminOptions): Promise<FastifyInstance> {
  const app = Fastify({ logger: false })
  installErrorHandling(app)
  const { gateway } = options

  if (options.token !== undefined) {
    const expected = digest(`Bearer ${options.token}`)
    app.addHook('onRequest', function requireAdminToken (request, _reply, done) {
      // Probes cannot carry a secret header: liveness and readiness stay open, they reveal no key data.
      if (request.url === '/healthz' || request.url === '/readyz') { done(); return }
      const given = digest(request.headers.authorization ?? '')
      if (!timingSafeEqual(given, expected)) {
        done(adminErrors.tokenRequired())
        return
      }
      done()
    })
  }

  app.get('/healthz', async () => ({ status: 'ok' }))
  app.get('/readyz', async (_request, reply) => {
    const report = await options.readiness.report()
    return reply.code(report.ready ? 200 : 503).send({ status: report.ready ? 'ready' : 'not_ready', checks: report.checks })
  })
  await app.register(adminApi, { gateway, identity: options.token === undefined ? 'loopback' : 'admin-token' })
  app.get('/metrics', async (_request, reply) => {
    const { registry } = gateway.metrics
    return reply.type(registry.contentType).send(await registry.metrics())
  })
  return app
}
