// The floors under @fastify/http-proxy, for bench/proxy-cost.ts: the same undici pool (the gateway's
// pool settings) driven by hand, so "proxy ÷ pool" is what the proxy plugin costs per request.
//   node --import tsx bench/servers/undici-pool.ts <backendUrl> node      node:http + undici, nothing else
//   node --import tsx bench/servers/undici-pool.ts <backendUrl> fastify   Fastify routes + undici, body streamed by reply.send
// Both forward the request headers as they came (host rewritten) and stream the backend's body back.
// Prints {"port":N} once listening; SIGTERM stops it.
import { createServer, type IncomingHttpHeaders } from 'node:http'
import Fastify from 'fastify'
import { Pool } from 'undici'
import { DEFAULT_UPSTREAM_CONNECTIONS, DEFAULT_UPSTREAM_PIPELINING } from '../../src/gateway/proxy/plugin.js'

const backendUrl = process.argv[2] ?? 'http://127.0.0.1:3001'
const mode = process.argv[3] ?? 'node'
const host = new URL(backendUrl).host
const pool = new Pool(backendUrl, { connections: DEFAULT_UPSTREAM_CONNECTIONS, pipelining: DEFAULT_UPSTREAM_PIPELINING })

function forwarded (headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {}
  for (const name in headers) if (name !== 'connection') out[name] = headers[name]
  out.host = host
  return out
}

let port: number
let close: () => Promise<void>
if (mode === 'node') {
  const server = createServer((req, res) => {
    pool.request({ path: req.url ?? '/', method: 'GET', headers: forwarded(req.headers) }, (err, data) => {
      if (err !== null) { res.statusCode = 502; res.end(); return }
      res.writeHead(data.statusCode, data.headers as Record<string, string>)
      data.body.pipe(res)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  port = (server.address() as { port: number }).port
  close = async () => { await new Promise((resolve) => server.close(resolve)) }
} else {
  const app = Fastify({ logger: false })
  for (const url of ['/v1/pets', '/v1/pets/:petId', '/v1/store/orders']) {
    app.get(url, (request, reply) => {
      pool.request({ path: request.url, method: 'GET', headers: forwarded(request.headers) }, (err, data) => {
        if (err !== null) { void reply.code(502).send(); return }
        void reply.code(data.statusCode).headers(data.headers).send(data.body)
      })
      return reply
    })
  }
  await app.listen({ host: '127.0.0.1', port: 0 })
  port = (app.server.address() as { port: number }).port
  close = async () => { await app.close() }
}
process.stdout.write(`${JSON.stringify({ port })}\n`)
process.once('SIGTERM', () => { void close().then(async () => { await pool.close(); process.exit(0) }) })
