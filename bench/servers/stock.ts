// The stock-plugin assembly the gateway is compared with: Fastify + @fastify/http-proxy +
// @fastify/rate-limit on the same Redis, keyed by the bearer token (what one would assemble from
// the ecosystem in an afternoon). Logs off, no metrics: it is given every advantage. Same upstream
// pool settings as the gateway. With `auto-pipelining`, its ioredis client batches the commands of
// one event-loop turn into one write (`enableAutoPipelining`, as the plugin's own example does): a
// second stock peer, configured as users configure it. Prints {"port":N} once listening; SIGTERM stops it.
//   node --import tsx bench/servers/stock.ts <backendUrl> <redisUrl> [auto-pipelining]
import Fastify from 'fastify'
import httpProxy from '@fastify/http-proxy'
import rateLimit from '@fastify/rate-limit'
import { Redis } from 'ioredis'
import { DEFAULT_UPSTREAM_CONNECTIONS, DEFAULT_UPSTREAM_PIPELINING } from '../../src/gateway/proxy/plugin.js'

const DEFAULT_MAX_PER_MINUTE = 1_000_000_000

const backendUrl = process.argv[2] ?? 'http://127.0.0.1:3001'
const redis = new Redis(process.argv[3] ?? 'redis://127.0.0.1:6379', {
  connectTimeout: 500,
  maxRetriesPerRequest: 1,
  enableAutoPipelining: process.argv[4] === 'auto-pipelining'
})
const app = Fastify({ logger: false })
await app.register(rateLimit, {
  redis,
  max: DEFAULT_MAX_PER_MINUTE,
  timeWindow: 60_000,
  nameSpace: 'stock-rl-',
  keyGenerator: (request) => {
    const auth = request.headers.authorization
    return auth !== undefined && auth.startsWith('Bearer ') ? auth.slice(7) : request.ip
  }
})
await app.register(httpProxy, {
  upstream: backendUrl,
  prefix: '/v1',
  rewritePrefix: '/v1',
  undici: { connections: DEFAULT_UPSTREAM_CONNECTIONS, pipelining: DEFAULT_UPSTREAM_PIPELINING }
})
await app.listen({ host: '127.0.0.1', port: 0 })
process.stdout.write(`${JSON.stringify({ port: (app.server.address() as { port: number }).port })}\n`)
process.once('SIGTERM', () => { void app.close().then(() => { redis.disconnect(); process.exit(0) }) })
