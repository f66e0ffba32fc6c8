// Baseline of the bench: Fastify + @fastify/http-proxy and nothing else (no auth, no limiter, no
// logs, no metrics), with the same upstream pool settings as the gateway's proxy, so "gateway ÷
// bare proxy" is the cost of the policy layer alone. Prints {"port":N} once listening; SIGTERM stops it.
//   node --import tsx bench/servers/bare-proxy.ts <backendUrl> [connections] [pipelining]   (the last two: pool A/B runs)
import Fastify from 'fastify'
import httpProxy from '@fastify/http-proxy'
import { DEFAULT_UPSTREAM_CONNECTIONS, DEFAULT_UPSTREAM_PIPELINING } from '../../src/gateway/proxy/plugin.js'

const backendUrl = process.argv[2] ?? 'http://127.0.0.1:3001'
const app = Fastify({ logger: false })
await app.register(httpProxy, {
  upstream: backendUrl,
  prefix: '/v1',
  rewritePrefix: '/v1',
  undici: {
    connections: Number(process.argv[3] ?? DEFAULT_UPSTREAM_CONNECTIONS),
    pipelining: Number(process.argv[4] ?? DEFAULT_UPSTREAM_PIPELINING)
  }
})
await app.listen({ host: '127.0.0.1', port: 0 })
process.stdout.write(`${JSON.stringify({ port: (app.server.address() as { port: number }).port })}\n`)
process.once('SIGTERM', () => { void app.close().then(() => process.exit(0)) })
