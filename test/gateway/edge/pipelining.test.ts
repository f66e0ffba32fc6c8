// Pipelining cannot starve others (issue 33, row 2). The attack: 256 connections × 32 pipelined
// requests on one key; Node parsed every request a read held and handed all 8,192 to the gateway at
// once, so a client on another connection waited seconds behind them. Here, on real sockets: a
// connection's requests enter the gateway one at a time and in order, reading it stops while it
// has PIPELINE_DEPTH requests unanswered, and a read holding more than the parse-ahead bound closes
// it. The victim's latency under wrk at full size is bench/pipeline-flood.ts.
import { connect, type Socket } from 'node:net'
import { performance } from 'node:perf_hooks'
import t, { type Test } from 'tap'
import { DEFAULT_PIPELINE_DEPTH, DEFAULT_PIPELINE_MAX_PARSED, MIN_PIPELINE_DEPTH } from '../../../src/gateway/edge/pipeline-gate.js'
import { startHeldUpstream } from '../../helpers/echo-upstream.js'
import { startGateway, type StartedGateway } from '../../helpers/gateway.js'
import { DEMO_KEYS } from '../../helpers/config-fixture.js'
import { sleep, until } from '../../helpers/poll.js'
import { summary, victimKeptAlive } from '../../helpers/victim.js'

const KEY_HEAD = `GET /v1/pets HTTP/1.1\r\nhost: gateway\r\nauthorization: Bearer ${DEMO_KEYS.enterprise}\r\n\r\n`

/** A raw connection collecting the status lines of its answers, in order. */
function rawConnection (t: Test, port: number, localAddress: string): { socket: Socket, statuses: () => number[], closed: () => boolean } {
  const socket = connect({ host: '127.0.0.1', port, localAddress })
  let text = ''
  let closed = false
  socket.setEncoding('latin1')
  socket.on('data', (chunk: string) => { text += chunk })
  socket.on('error', () => {})
  socket.on('close', () => { closed = true })
  t.teardown(() => socket.destroy())
  return { socket, statuses: () => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1])), closed: () => closed }
}

/** Every 'request' the HTTP server emitted: what Node parsed, whether or not the gateway processes it yet. */
function countParsed (gw: StartedGateway): () => number {
  let parsed = 0
  gw.app.server.on('request', () => { parsed++ })
  return () => parsed
}

t.test('32 pipelined requests: one at a time in the gateway, all answered in order; reading stops while the connection has PIPELINE_DEPTH unanswered', async (t) => {
  const backend = await startHeldUpstream(t)
  const gw = await startGateway(t, { backendUrl: backend.url })
  const parsed = countParsed(gw)
  const c = rawConnection(t, Number(new URL(gw.url).port), '127.0.95.1')
  c.socket.write(KEY_HEAD.repeat(32))
  await until('the first request at the backend', () => backend.received.length === 1)
  await until('the 32 parsed', () => parsed() === 32)
  await sleep(200)
  t.equal(gw.app.drain.inFlight, 1, 'one request of the connection in the gateway; 31 wait unprocessed')
  t.equal(backend.received.length, 1)

  c.socket.write(KEY_HEAD.repeat(8))
  await sleep(300)
  t.equal(parsed(), 32, `${DEFAULT_PIPELINE_DEPTH} or more unanswered: the connection is not read`)

  backend.release()
  await until('40 answers', () => c.statuses().length === 40)
  t.same(c.statuses(), Array.from({ length: 40 }, () => 200), 'every request answered')
  t.equal(parsed(), 40, 'and read once there was room')
  t.equal(gw.app.drain.inFlight, 0)
  t.notOk(c.closed(), 'the connection stays open')
})

t.test(`a read holding more than ${DEFAULT_PIPELINE_MAX_PARSED} requests closes the connection; none of them reaches the backend`, async (t) => {
  const backend = await startHeldUpstream(t)
  const gw = await startGateway(t, { backendUrl: backend.url })
  const c = rawConnection(t, Number(new URL(gw.url).port), '127.0.95.2')
  c.socket.write(KEY_HEAD.repeat(DEFAULT_PIPELINE_MAX_PARSED + 36))
  await until('the connection closed', () => c.closed(), 5_000)
  await sleep(100)
  t.ok(backend.received.length <= 1, `at most the first request was sent on (${backend.received.length})`)
  await until('nothing left in flight', () => gw.app.drain.inFlight === 0)
})

t.test(`at the smallest depth (${MIN_PIPELINE_DEPTH}), bodies that arrive after their heads are still read: pipelined POSTs sent in pieces are all answered`, async (t) => {
  const gw = await startGateway(t, { serverLimits: { pipelineDepth: MIN_PIPELINE_DEPTH } })
  const c = rawConnection(t, Number(new URL(gw.url).port), '127.0.95.3')
  const body = JSON.stringify({ name: 'Rex', categoryId: 1 })
  const post = `POST /v1/pets HTTP/1.1\r\nhost: gateway\r\nauthorization: Bearer ${DEMO_KEYS.enterprise}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`
  c.socket.write(post + body.slice(0, 5))
  await sleep(150)
  c.socket.write(body.slice(5) + post + body + post + body.slice(0, 3))
  await sleep(150)
  c.socket.write(body.slice(3) + KEY_HEAD)
  await until('four answers', () => c.statuses().length === 4, 5_000)
  t.same(c.statuses(), [201, 201, 201, 200], 'each body read in its turn, then the GET')
})

t.test('a pipelined flood on 32 connections: never more requests in the gateway than connections, and a client on another address is served', async (t) => {
  const gw = await startGateway(t, { loadShedding: {} })
  const port = Number(new URL(gw.url).port)
  let flooding = true
  let answered = 0
  /** Closed loop: 32 requests in one write, the next 32 once the 32 answers are in. */
  const flooder = async (n: number): Promise<void> => {
    const c = rawConnection(t, port, `127.0.96.${n + 1}`)
    await new Promise((resolve) => c.socket.once('connect', resolve))
    let expected = 0
    while (flooding && !c.closed()) {
      expected += 32
      c.socket.write(KEY_HEAD.repeat(32))
      await until('a pipeline answered', () => c.statuses().length >= expected || c.closed(), 30_000, 5)
    }
    answered += c.statuses().length
    c.socket.destroy()
  }
  let peak = 0
  const sampler = setInterval(() => { peak = Math.max(peak, gw.app.drain.inFlight) }, 1)
  const floods = Array.from({ length: 32 }, async (_, n) => await flooder(n))
  await sleep(300)
  const started = performance.now()
  const victim = await victimKeptAlive({ host: '127.0.0.1', port }, '127.0.97.1', { count: 40, intervalMs: 50, key: DEMO_KEYS.pro })
  flooding = false
  await Promise.all(floods)
  clearInterval(sampler)
  t.comment(`flood: ${answered} answers in ${Math.round(performance.now() - started + 300)} ms; peak in the gateway ${peak}; victim: ${summary(victim)}`)
  t.ok(peak <= 33, `at most one request per connection in the gateway (peak ${peak}; 32 × 32 before)`)
  t.equal(victim.answered, victim.sent, 'the victim got every answer')
  t.ok(answered > 0, 'the flood was served too')
})
