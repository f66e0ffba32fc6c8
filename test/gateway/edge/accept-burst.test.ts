// A burst of new connections cannot hold a newcomer behind it (issue 39 row 6 at full size: a
// victim's worst request took 2.2–4.9 s). libuv accepts one connection per listening socket per turn
// of the event loop and the accept queue is first come, first served: a victim connecting just
// after an attacker opened 200 connections (each pipelining big responses) waited for 200 turns,
// each serving the newly accepted connection's first response and a few pipelined ones, before it
// was even accepted. Now more listening sockets share the port (edge/accept-shards.ts) and a
// client's new connections are read a few per turn (edge/connection-limits.ts). What load cannot
// move is asserted: how many of the attacker's responses were written before the victim's answer
// (before: about one per attacking connection and more; after: a few turns' worth). Times printed.
import { once } from 'node:events'
import { createServer as createHttpServer } from 'node:http'
import { connect, createServer as createNetServer, type Socket } from 'node:net'
import { performance } from 'node:perf_hooks'
import type { IncomingMessage, ServerResponse } from 'node:http'
import t from 'tap'
import { OPENAPI_PATH } from '../../../src/gateway/openapi/plugin.js'
import { shardAccepts } from '../../../src/gateway/edge/accept-shards.js'
import { startGateway } from '../../helpers/gateway.js'
import { until } from '../../helpers/poll.js'
import { freePort } from '../../helpers/ports.js'

const ATTACKERS = 256
const DEPTH = 2
const ATTACKER_ADDRESS = '127.0.112.1'
const VICTIM_ADDRESS = '127.0.113.1'
const OPENAPI_HEAD = `GET ${OPENAPI_PATH} HTTP/1.1\r\nhost: gateway`
/**
 * Attacker responses written before the victim's answer, at most: one per attacking connection.
 * Without the fix all of them are (512: the victim is accepted after all 256 connections, each read
 * and answered meanwhile); with it the victim's listening socket holds about 256 / 64 connections
 * ahead of it, and each turn reads four of the attacker's new connections and lets in four of its
 * pipelined requests (36–92 measured at load 28–36).
 */
const BOUND = ATTACKERS

t.test('row 6: a victim connecting behind a burst of 256 pipelining connections is answered before most of them', async (t) => {
  const gw = await startGateway(t)
  const port = Number(new URL(gw.url).port)
  let attackerWritten = 0
  let attackerAccepted = 0
  gw.app.server.on('connection', (socket: Socket) => {
    if (socket.remoteAddress === ATTACKER_ADDRESS) attackerAccepted++
  })
  gw.app.server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (req.socket.remoteAddress === ATTACKER_ADDRESS) res.once('finish', () => { attackerWritten++ })
  })

  const batch = `${OPENAPI_HEAD}\r\n\r\n`.repeat(DEPTH)
  const sockets: Socket[] = []
  t.teardown(() => { for (const s of sockets) s.destroy() })
  const connected: Array<Promise<void>> = []
  for (let i = 0; i < ATTACKERS; i++) {
    const socket = connect({ host: '127.0.0.1', port, localAddress: ATTACKER_ADDRESS })
    socket.on('error', () => {})
    socket.resume()
    connected.push(new Promise((resolve) => socket.once('connect', () => { socket.write(batch); resolve() })))
    sockets.push(socket)
  }
  await Promise.all(connected)
  // Every attacking connection is established (in the accept queue or accepted): the victim comes after them.
  const acceptedBeforeVictim = attackerAccepted
  const started = performance.now()
  const answer = await new Promise<{ status: number, writtenBefore: number }>((resolve, reject) => {
    const victim = connect({ host: '127.0.0.1', port, localAddress: VICTIM_ADDRESS })
    sockets.push(victim)
    let text = ''
    victim.setEncoding('latin1')
    victim.on('error', reject)
    victim.once('connect', () => { victim.write(`${OPENAPI_HEAD}\r\nconnection: close\r\n\r\n`) })
    victim.on('data', (chunk: string) => {
      if (text === '') resolve({ status: Number(chunk.slice(9, 12)), writtenBefore: attackerWritten })
      text += chunk
    })
  })
  const latency = performance.now() - started
  t.comment(`victim answered in ${latency.toFixed(0)} ms; attacker connections accepted when it connected: ${acceptedBeforeVictim} of ${ATTACKERS}, by its answer: ${attackerAccepted}; attacker responses written before its answer: ${answer.writtenBefore}`)
  t.equal(answer.status, 200, 'the victim is answered')
  t.ok(acceptedBeforeVictim < ATTACKERS / 2, `the victim connected behind a burst: ${acceptedBeforeVictim} of ${ATTACKERS} attacking connections accepted by then`)
  t.ok(answer.writtenBefore <= BOUND, `at most ${BOUND} attacker responses written before the victim's answer: ${answer.writtenBefore}`)
})

// The shards on a plain HTTP server, on a port given (the deployment's case: tests elsewhere listen on port 0).
t.test('accept shards on a fixed free port: they open beside the listener and their connections are served; close waits for them', async (t) => {
  const port = await freePort()
  const server = createHttpServer((_req, res) => { res.end('ok') })
  const errors: Error[] = []
  const shards = shardAccepts(server, 3, (err) => { errors.push(err) })
  t.equal(shards.open, 0, 'none before the server listens')
  server.listen({ host: '127.0.0.1', port })
  await once(server, 'listening')
  await until('the shards listen', () => shards.open === 3 || undefined)
  const bodies = await Promise.all(Array.from({ length: 24 }, async () => {
    const res = await fetch(`http://127.0.0.1:${port}/`, { headers: { connection: 'close' } })
    return await res.text()
  }))
  t.same(new Set(bodies), new Set(['ok']), 'every new connection answered, whichever socket accepted it')
  t.same(errors, [])
  await new Promise<void>((resolve, reject) => { server.close((err) => { if (err === undefined) resolve(); else reject(err) }) })
  t.equal(shards.open, 0, 'closing the server closes the shards')
})

t.test('accept shards: a port another socket holds, even one that allows sharing it (SO_REUSEPORT), is refused with EADDRINUSE', async (t) => {
  const port = await freePort()
  const holder = createNetServer()
  holder.listen({ host: '127.0.0.1', port, reusePort: true })
  await once(holder, 'listening')
  t.teardown(() => { holder.close() })
  const server = createHttpServer((_req, res) => { res.end('ok') })
  const shards = shardAccepts(server, 3, () => {})
  t.teardown(() => { if (server.listening) server.close() })
  server.listen({ host: '127.0.0.1', port })
  const outcome = await Promise.race([
    once(server, 'error').then(([err]) => (err as NodeJS.ErrnoException).code),
    once(server, 'listening').then(() => 'listening beside it')
  ])
  t.equal(outcome, 'EADDRINUSE', 'the port is not silently shared with the socket already on it')
  t.notOk(server.listening)
  t.equal(shards.open, 0, 'no shard opened')
})
