// Forwards the public operations to the backend with @fastify/http-proxy over one keep-alive undici
// pool. The gateway, not the client, decides the identity headers the backend sees.
import fp from 'fastify-plugin'
import httpProxy from '@fastify/http-proxy'
import type { FastifyRequest, HTTPMethods } from 'fastify'
import { Pool } from 'undici'
import { registerMethodNotAllowed } from '../../shared/api-error.js'
import { methodsByPath, OPERATIONS, type Operation } from './operations.js'
import { upstreamError } from './upstream-errors.js'
import { probeBackend } from './backend-probe.js'

export const DEFAULT_UPSTREAM_CONNECTIONS = 64
const PREFIX = '/v1'

export interface ProxyOptions {
  backendUrl: string
  upstreamTimeoutMs: number
  connections?: number
  operations?: readonly Operation[]
}

/** Headers that only the gateway may set, and that never leave for the backend as the client sent them. */
const GATEWAY_OWNED = ['authorization', 'x-consumer-id', 'x-consumer-plan', 'x-request-id', 'connection', 'keep-alive', 'proxy-authorization']

type Headers = Record<string, string | string[] | undefined>

export function backendRequestHeaders (request: Pick<FastifyRequest, 'id' | 'consumer'>, headers: Headers): Headers {
  const out: Headers = { ...headers }
  for (const name of GATEWAY_OWNED) delete out[name]
  out['x-request-id'] = request.id
  if (request.consumer !== null) {
    out['x-consumer-id'] = request.consumer.id
    out['x-consumer-plan'] = request.consumer.plan
  }
  return out
}

export const proxyPlugin = fp<ProxyOptions>(async function proxyPlugin (app, opts) {
  const operations = opts.operations ?? OPERATIONS
  const pool = new Pool(opts.backendUrl, {
    connections: opts.connections ?? DEFAULT_UPSTREAM_CONNECTIONS,
    pipelining: 1,
    headersTimeout: opts.upstreamTimeoutMs,
    bodyTimeout: opts.upstreamTimeoutMs,
    keepAliveTimeout: 30_000
  })
  app.addHook('onClose', async () => { await pool.close() })
  app.health.checks.set('backend', () => probeBackend(opts.backendUrl))

  const pathsByMethod = new Map<HTTPMethods, string[]>()
  for (const op of operations) {
    const paths = pathsByMethod.get(op.method) ?? []
    paths.push(op.path.slice(PREFIX.length))
    pathsByMethod.set(op.method, paths)
  }

  for (const [method, routes] of pathsByMethod) {
    await app.register(httpProxy, {
      upstream: opts.backendUrl,
      prefix: PREFIX,
      rewritePrefix: PREFIX,
      httpMethods: [method],
      routes,
      proxyPayloads: false,
      undici: pool,
      disableRequestLogging: true,
      replyOptions: {
        rewriteRequestHeaders: backendRequestHeaders,
        onError (reply, { error }) {
          reply.send(upstreamError(error))
        }
      }
    })
  }

  for (const [path, methods] of methodsByPath(operations)) {
    registerMethodNotAllowed(app, path, methods)
  }
}, { name: 'gateway-proxy', dependencies: ['gateway-authenticate', 'gateway-health'] })
