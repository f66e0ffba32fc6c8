// A client that resets while its request waits for a backend connection gives its queue place back
// at once (issue 39, the upstream queue's leftover). Its waiter used to stay in the upstream gate's
// queue, counted against UPSTREAM_QUEUE_MAX, until its turn came and it was found abandoned: a few
// clients that queue and reset kept the queue full, and everyone else was answered 503
// `upstream_queue_full` meanwhile. Here: one backend connection held by a slow (held) backend, a
// queue of two places filled by two clients that then reset; a new request must be queued, not
// refused, and served once the backend answers. What load cannot move is asserted: queue counts
// and statuses, not times.
import { connect, type Socket } from 'node:net'
import t from 'tap'
import { startHeldUpstream } from '../../helpers/echo-upstream.js'
import { startGateway } from '../../helpers/gateway.js'
import { DEMO_KEYS } from '../../helpers/config-fixture.js'
import { until } from '../../helpers/poll.js'
import { sampleValue, scrape } from '../../helpers/scrape.js'

const QUEUE_MAX = 2
const REQUEST = `GET /v1/pets HTTP/1.1\r\nhost: gateway\r\nauthorization: Bearer ${DEMO_KEYS.enterprise}\r\n\r\n`

/** A raw connection that sends one request; `answer` resolves with the status line's code (0: closed without one). */
function rawRequest (port: number): { socket: Socket, answer: Promise<number> } {
  const socket = connect({ host: '127.0.0.1', port })
  socket.setEncoding('latin1')
  socket.on('error', () => {})
  let text = ''
  socket.on('connect', () => { socket.write(REQUEST) })
  const answer = new Promise<number>((resolve) => {
    socket.on('data', (chunk: string) => {
      text += chunk
      if (text.includes('\r\n\r\n')) resolve(Number(text.slice(9, 12)))
    })
    socket.once('close', () => { resolve(Number(text.slice(9, 12)) || 0) })
  })
  return { socket, answer }
}

t.test('waiters whose clients reset leave the upstream queue at once: a new request gets a place, not 503 queue_full', async (t) => {
  const upstream = await startHeldUpstream(t)
  const gw = await startGateway(t, { backendUrl: upstream.url, upstreamConnections: 1, upstreamQueueMax: QUEUE_MAX, upstreamTimeoutMs: 30_000 })
  const port = Number(new URL(gw.url).port)
  const gate = gw.app.upstream

  const holder = rawRequest(port)
  t.teardown(() => holder.socket.destroy())
  await until('the one backend connection to be taken', () => gate.inFlight === 1)
  const waiters = Array.from({ length: QUEUE_MAX }, () => rawRequest(port))
  await until('the queue to be full', () => gate.queued === QUEUE_MAX)

  for (const waiter of waiters) waiter.socket.resetAndDestroy()
  await until('the reset clients\' connections to be closed', () => gw.app.connections.open === 1)
  t.equal(gate.queued, 0, 'the reset waiters left the queue when their clients went away (before: still 2, the queue full)')

  const newcomer = rawRequest(port)
  t.teardown(() => newcomer.socket.destroy())
  let answered: number | undefined
  void newcomer.answer.then((status) => { answered = status })
  await until('the newcomer to be queued or answered', () => gate.queued === 1 || answered !== undefined)
  t.equal(answered, undefined, `the newcomer is not refused (before: ${String(answered ?? '')} upstream_queue_full at once)`)
  t.equal(gate.queued, 1, 'it holds the one queue place')

  upstream.release()
  t.equal(await holder.answer, 200, 'the request holding the connection is answered')
  t.equal(await newcomer.answer, 200, 'the newcomer is served once the connection is free')
  t.equal(upstream.received.length, 2, 'the reset waiters never reached the backend')
  const { samples } = await scrape(gw.adminUrl)
  t.equal(sampleValue(samples, 'gateway_shed_requests_total', { reason: 'upstream_queue_full' }), 0, 'nothing was refused for a full queue')
  t.equal(sampleValue(samples, 'gateway_upstream_queued'), 0)
  t.equal(sampleValue(samples, 'gateway_upstream_in_flight'), 0)
})
