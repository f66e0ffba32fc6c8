// The gateway's proxy plugin (src/gateway/proxy/plugin.ts: its @fastify/http-proxy routes, the
// forwarder, header policy, upstream gate and error mapping) alone on Fastify, without
// authentication, limiter, logs or metrics: bench/proxy-cost.ts compares it with stock
// @fastify/http-proxy and with the undici pool underneath both. Prints {"port":N} once listening;
// SIGTERM stops it.
//   node --import tsx bench/servers/lean-proxy.ts <backendUrl> [checkout root, for a before/after]
import { join } from 'node:path'
import Fastify from 'fastify'
import fp from 'fastify-plugin'
import type * as ProxyModule from '../../src/gateway/proxy/plugin.js'
import type * as TimingModule from '../../src/gateway/observability/metrics/upstream-timing.js'
import { DEFAULT_UPSTREAM_TIMEOUT_MS } from '../../src/gateway/runtime/settings.js'
import { ReadinessRegistry } from '../../src/gateway/runtime/readiness.js'

const backendUrl = process.argv[2] ?? 'http://127.0.0.1:3001'
const root = process.argv[3] ?? join(import.meta.dirname, '..', '..')
const { proxyPlugin } = await import(join(root, 'src', 'gateway', 'proxy', 'plugin.ts')) as typeof ProxyModule
const { upstreamTimingPlugin } = await import(join(root, 'src', 'gateway', 'observability', 'metrics', 'upstream-timing.ts')) as typeof TimingModule
const app = Fastify({ logger: false })
// What the proxy reads from authentication: every request anonymous.
await app.register(fp(async (instance) => { instance.decorateRequest('consumer', null) }, { name: 'gateway-authenticate' }))
await app.register(upstreamTimingPlugin)
await app.register(proxyPlugin, { backendUrl, upstreamTimeoutMs: DEFAULT_UPSTREAM_TIMEOUT_MS, readiness: new ReadinessRegistry() })
await app.listen({ host: '127.0.0.1', port: 0 })
process.stdout.write(`${JSON.stringify({ port: (app.server.address() as { port: number }).port })}\n`)
process.once('SIGTERM', () => { void app.close().then(() => process.exit(0)) })
