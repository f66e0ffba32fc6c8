// Forwards the public operations to the backend: @fastify/http-proxy routes them (prefix, paths,
// destination checks) and hands each to the gateway's own forwarder (forward.ts), which sends it
// over one keep-alive undici pool through the upstream gate (upstream-gate.ts: the upstream budget
// is end to end, and a request that cannot be served within it is answered 503 at once). The
// gateway, not the client, decides the identity headers the backend sees (request-headers.ts).
import { performance } from 'node:perf_hooks'
import fp from 'fastify-plugin'
import httpProxy from '@fastify/http-proxy'
import type { HTTPMethods } from 'fastify'
import { Pool } from 'undici'
import { registerMethodNotAllowed } from '../../interface/errors.js'
import { methodsByPath, OPERATIONS, type Operation } from './operations.js'
import { createForwarder } from './forward.js'
import { probeBackend } from './backend-probe.js'
import { DEFAULT_UPSTREAM_CONNECTIONS, DEFAULT_UPSTREAM_QUEUE_MAX, UpstreamGate, type UpstreamGateStatus } from './upstream-gate.js'
import type { ReadinessRegistry } from '../runtime/readiness.js'

export { DEFAULT_UPSTREAM_CONNECTIONS, DEFAULT_UPSTREAM_QUEUE_MAX } from './upstream-gate.js'
/** Requests in flight per upstream connection; 1 = no HTTP pipelining (see bench/results/latest.md). */
export const DEFAULT_UPSTREAM_PIPELINING = 1
/** Idle upstream sockets are kept this long (the backend's own keep-alive is longer). */
export const DEFAULT_UPSTREAM_KEEP_ALIVE_MS = 30_000
const PREFIX = '/v1'

declare module 'fastify' {
  interface FastifyInstance {
    /** The upstream gate's state, read by the metrics at scrape time. */
    upstream: UpstreamGateStatus
  }
}

export interface ProxyOptions {
  backendUrl: string
  /** The upstream budget of one request: waiting for a connection, then the backend's answer (headers). */
  upstreamTimeoutMs: number
  /** UPSTREAM_CONNECTIONS: connections to the backend, and so requests in flight to it at most. */
  connections?: number
  /** Requests waiting for a connection at most (UPSTREAM_QUEUE_MAX). */
  queueMax?: number
  operations?: readonly Operation[]
  /** Where the backend's readiness check is registered. */
  readiness: ReadinessRegistry
}

/** http-proxy's `preRewrite`: the path alone. It would parse and re-serialise the query only to drop it; the forwarder sends the client's own. */
function pathOnly (url: string): string {
  const query = url.indexOf('?')
  return query === -1 ? url : url.slice(0, query)
}

export const proxyPlugin = fp<ProxyOptions>(async function proxyPlugin (app, opts) {
  const operations = opts.operations ?? OPERATIONS
  const connections = opts.connections ?? DEFAULT_UPSTREAM_CONNECTIONS
  const pool = new Pool(opts.backendUrl, {
    connections,
    pipelining: DEFAULT_UPSTREAM_PIPELINING,
    // Per request, the forwarder gives what is left of the budget after the wait at the gate.
    headersTimeout: opts.upstreamTimeoutMs,
    bodyTimeout: opts.upstreamTimeoutMs,
    connectTimeout: opts.upstreamTimeoutMs,
    keepAliveTimeout: DEFAULT_UPSTREAM_KEEP_ALIVE_MS
  })
  const now = (): number => performance.now()
  const gate = new UpstreamGate({ connections, queueMax: opts.queueMax ?? DEFAULT_UPSTREAM_QUEUE_MAX, budgetMs: opts.upstreamTimeoutMs, now })
  app.decorate('upstream', gate)
  // onClose runs after the listener closed its last connection: no client waits on what is still
  // running upstream (a request cut at the drain deadline), so destroy rather than wait for it.
  app.addHook('onClose', async () => {
    gate.close()
    await pool.destroy()
  })
  opts.readiness.register('backend', () => probeBackend(opts.backendUrl))

  const pathsByMethod = new Map<HTTPMethods, string[]>()
  for (const op of operations) {
    const paths = pathsByMethod.get(op.method) ?? []
    paths.push(op.path.slice(PREFIX.length))
    pathsByMethod.set(op.method, paths)
  }

  const forward = createForwarder({ pool, gate, host: new URL(opts.backendUrl).host, now })
  for (const [method, routes] of pathsByMethod) {
    await app.register(httpProxy, {
      upstream: opts.backendUrl,
      prefix: PREFIX,
      rewritePrefix: PREFIX,
      httpMethods: [method],
      routes,
      // Fastify parses (and checks) the JSON body; the forwarder sends it.
      proxyPayloads: false,
      preRewrite: pathOnly,
      handler: forward,
      // reply-from (registered by http-proxy, unused by the forwarder) shares the pool instead of opening its own.
      undici: pool
    })
  }

  for (const [path, methods] of methodsByPath(operations)) {
    registerMethodNotAllowed(app, path, methods)
  }
}, { name: 'gateway-proxy', dependencies: ['gateway-authenticate'] })
