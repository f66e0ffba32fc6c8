// buildAdmin: the operations side of a gateway on its own port (loopback by default) — /healthz,
// /readyz, and the slots where metrics and the admin API attach. Never reachable from the
// public port, and, when ADMIN_TOKEN is set, closed to requests without that bearer token.
import { timingSafeEqual, createHash } from 'node:crypto'
import Fastify, { type FastifyInstance } from 'fastify'
import { ApiError, installErrorHandling } from '../../shared/api-error.js'
import { checkReadiness } from '../health.js'

export interface AdminOptions {
  gateway: FastifyInstance
  /** When set, every admin request but /healthz must carry `Authorization: Bearer <token>`. */
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
      if (request.url === '/healthz') { done(); return }
      const given = digest(request.headers.authorization ?? '')
      if (!timingSafeEqual(given, expected)) {
        done(new ApiError(401, 'unauthorized', 'Admin token required', { 'www-authenticate': 'Bearer realm="petstore-admin"' }))
        return
      }
      done()
    })
  }

  app.get('/healthz', async () => ({ status: 'ok' }))
  app.get('/readyz', async (_request, reply) => {
    const report = await checkReadiness(gateway.health)
    return reply.code(report.ready ? 200 : 503).send({ status: report.ready ? 'ready' : 'not_ready', checks: report.checks })
  })
  return app
}
