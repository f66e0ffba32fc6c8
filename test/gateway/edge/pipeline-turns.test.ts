// A pipelined flood of big responses cannot hold a victim behind it (issue 39 row 6). The attack:
// 200 connections pipelining 60 × /v1/openapi.json (220 KB each); a victim's worst request took
// 4.6 s. A pipelined request entered the gateway as soon as the response before it was written, in
// the same turn of the event loop when the kernel took that response at once, so each connection
// had several of its responses written back to back — every connection, every turn — before a
// request on another connection was read, and a turn took so long that newcomers waited in the
// accept queue (a busy Node accepts one connection per turn). Now each turn lets in at most
// PIPELINED_PER_CLIENT_PER_TURN pipelined requests of one client, however many connections it
// pipelines on. What load cannot move is asserted: how many of the attacker's responses are
// written between the victim's request and its answer (a count per attacking address); the
// victim's latency is printed.
import { connect, type Socket } from 'node:net'
import { performance } from 'node:perf_hooks'
import type { IncomingMessage, ServerResponse } from 'node:http'
import t from 'tap'
import { PIPELINED_PER_CLIENT_PER_TURN } from '../../../src/gateway/edge/limits.js'
import { OPENAPI_PATH } from '../../../src/gateway/openapi/plugin.js'
import { startGateway } from '../../helpers/gateway.js'
import { openKeptAlive } from '../../helpers/kept-alive.js'
import { sleep, until } from '../../helpers/poll.js'

const ATTACKERS = 80
const ADDRESSES = 2
const DEPTH = 60
const VICTIMS = 10
const OPENAPI_HEAD = `GET ${OPENAPI_PATH} HTTP/1.1\r\nhost: gateway`
/** Turns a victim's request may wait: its read, its answer, and two to spare (a write let in one turn may finish in the next). */
const TURNS = 4

t.test('row 6: a few pipelined responses per client per turn; a victim on another address waits behind a few, not their pipelines', async (t) => {
  const gw = await startGateway(t)
  const port = Number(new URL(gw.url).port)
  let attackerWritten = 0
  gw.app.server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (req.socket.remoteAddress?.startsWith('127.0.110.') === true) res.once('finish', () => { attackerWritten++ })
  })
  const victim = await openKeptAlive({ port }, '127.0.111.1')
  t.teardown(() => victim.destroy())
  t.equal((await victim.send(OPENAPI_HEAD)).status, 200, 'the victim is answered before the attack')

  const batch = `${OPENAPI_HEAD}\r\n\r\n`.repeat(DEPTH)
  const sockets: Socket[] = []
  let running = true
  t.teardown(() => { running = false; for (const s of sockets) s.destroy() })
  for (let i = 0; i < ATTACKERS; i++) {
    const socket = connect({ host: '127.0.0.1', port, localAddress: `127.0.110.${(i % ADDRESSES) + 1}` })
    socket.on('error', () => {})
    // A client that reads everything and sends its next 60 once it has them: the flood never stops.
    let read = 0
    socket.on('connect', () => { socket.write(batch) })
    socket.on('data', (chunk: Buffer) => {
      read += chunk.length
      if (running && read >= DEPTH * 200_000) { read = 0; socket.write(batch) }
    })
    sockets.push(socket)
  }
  await until('the flood to be answering', () => attackerWritten >= ATTACKERS * 2)

  const latencies: number[] = []
  const waitedBehind: number[] = []
  for (let i = 0; i < VICTIMS; i++) {
    const before = attackerWritten
    const started = performance.now()
    t.equal((await victim.send(OPENAPI_HEAD)).status, 200)
    latencies.push(performance.now() - started)
    waitedBehind.push(attackerWritten - before)
    await sleep(20)
  }
  running = false
  const worst = Math.max(...waitedBehind)
  t.comment(`victim latencies (ms): ${latencies.map((l) => l.toFixed(0)).join(' ')}; worst ${Math.max(...latencies).toFixed(0)} ms`)
  t.comment(`attacker responses written while a victim request waited: ${waitedBehind.join(' ')} (${ATTACKERS} connections from ${ADDRESSES} addresses × ${DEPTH} pipelined)`)
  const bound = TURNS * ADDRESSES * PIPELINED_PER_CLIENT_PER_TURN
  t.ok(worst <= bound, `at most ${TURNS} turns × ${PIPELINED_PER_CLIENT_PER_TURN} per attacking address (${bound}): worst ${worst}, ${(worst / ATTACKERS).toFixed(2)} per connection`)
})
