// Forwards the public operations to the backend with @fastify/http-proxy over one keep-alive undici
// pool. The gateway, not the client, decides the identity headers the backend sees.
import fp from 'fastify-plugin'
import httpProxy from '@fastify/http-proxy'
import type { HTTPMethods } from 'fastify'
import { Pool } from 'undici'
import { registerMethodNotAllowed } from '../../interface/errors.js'
import { methodsByPath, OPERATIONS, type Operation } from './operations.js'
import { backendRequestHeaders } from './request-headers.js'
import { upstreamError } from './upstream-errors.js'
import { probeBackend } from './backend-probe.js'
import type { ReadinessRegistry } from '../runtime/readiness.js'
import { startUpstreamTimer, stopUpstreamTimer } from '../observability/metrics/upstream-timing.js'

export const DEFAULT_UPSTREAM_CONNECTIONS = 64
/** Requests in flight per upstream connection; 1 = no HTTP pipelining (see bench/results/latest.md). */
export const DEFAULT_UPSTREAM_PIPELINING = 1
/** Idle upstream sockets are kept this long (the backend's own keep-alive is longer). */
export const DEFAULT_UPSTREAM_KEEP_ALIVE_MS = 30_000
const PREFIX = '/v1'

export interface ProxyOptions {
  backendUrl: string
  upstreamTimeoutMs: number
  connections?: number
  operations?: readonly Operation[]
  /** Where the backend's readiness check is registered. */
  readiness: ReadinessRegistry
}

export const proxyPlugin = fp<ProxyOptions>(async function proxyPlugin (app, opts) {
  const operations = opts.operations ?? OPERATIONS
  const pool = new Pool(opts.backendUrl, {
    connections: opts.connections ?? DEFAULT_UPSTREAM_CONNECTIONS,
    pipelining: DEFAULT_UPSTREAM_PIPELINING,
    headersTimeout: opts.upstreamTimeoutMs,
    bodyTimeout: opts.upstreamTimeoutMs,
    keepAliveTimeout: DEFAULT_UPSTREAM_KEEP_ALIVE_MS
  })
  // onClose runs after the listener closed its last connection: no client waits on what is still
  // running upstream (a request cut at the drain deadline), so destroy rather than wait for it.
  app.addHook('onClose', async () => { await pool.destroy() })
  opts.readiness.register('backend', () => probeBackend(opts.backendUrl))

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
        rewriteRequestHeaders (request, headers) {
          startUpstreamTimer(request)
          return backendRequestHeaders(request, headers)
        },
        onResponse (request, reply, res) {
          stopUpstreamTimer(request)
          // Hop-by-hop: the backend connection's keep-alive is not the client's (a client that sent
          // `Connection: close` was otherwise kept open by the backend's `connection: keep-alive`).
          reply.removeHeader('connection')
          reply.removeHeader('keep-alive')
          reply.send(res.stream)
        },
        onError (reply, { error }) {
          stopUpstreamTimer(reply.request)
          reply.send(upstreamError(error))
        }
      }
    })
  }

  for (const [path, methods] of methodsByPath(operations)) {
    registerMethodNotAllowed(app, path, methods)
  }
}, { name: 'gateway-proxy', dependencies: ['gateway-authenticate'] })
