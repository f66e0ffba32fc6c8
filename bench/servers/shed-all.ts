// The floor of bench/overload.ts: Fastify answering every request at once with the gateway's shed
// 503 (pre-rendered, no hooks, no backend, connections kept alive). What a probe client sees from
// it under wrk -c1000 is the best any shedding can give on this machine: the cost of reading and
// answering a thousand connections' requests, and the load generator's share of the CPU.
// Prints {"port":N} once listening; SIGTERM stops it.
import Fastify from 'fastify'
import { gatewayErrors } from '../../src/interface/errors.js'

const shed = gatewayErrors.overloaded(1, {})
const body = JSON.stringify(shed.body)
const app = Fastify({ logger: false })
app.addHook('onRequest', (_request, reply, done) => {
  void reply.code(503).headers(shed.headers ?? {}).type('application/json; charset=utf-8').send(body)
  done()
})
app.get('/v1/pets', async () => [])
await app.listen({ host: '127.0.0.1', port: 0 })
process.stdout.write(`${JSON.stringify({ port: (app.server.address() as { port: number }).port })}\n`)
process.once('SIGTERM', () => { void app.close().then(() => process.exit(0)) })
