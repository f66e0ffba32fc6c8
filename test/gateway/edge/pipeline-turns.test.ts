// A pipelined flood of big responses cannot hold a victim behind it (issue 39 row 6). The attack:
// 200 connections pipelining 60 × /v1/openapi.json (220 KB each); a victim's worst request took
// 4.6 s. A pipelined request entered the gateway as soon as the response before it was written, in
// the same turn of the event loop when the kernel took that response at once, so each connection
// had several of its responses written back to back — every connection, every turn — before a
// request on another connection was read. Now a connection gets one response per turn. What load
// cannot move is asserted: how many of the attacker's responses are written between the victim's
// request and its answer (a count per attacking connection); the victim's latency is printed.
import { connect, type Socket } from 'node:net'
import { performance } from 'node:perf_hooks'
import type { IncomingMessage, ServerResponse } from 'node:http'
import t from 'tap'
import { OPENAPI_PATH } from '../../../src/gateway/openapi/plugin.js'
import { startGateway } from '../../helpers/gateway.js'
import { openKeptAlive } from '../../helpers/kept-alive.js'
import { sleep, until } from '../../helpers/poll.js'

const ATTACKERS = 20
const DEPTH = 60
const VICTIMS = 10
const OPENAPI_HEAD = `GET ${OPENAPI_PATH} HTTP/1.1\r\nhost: gateway`
/** Attacker responses written while one victim request waits, per attacking connection, at most. */
const PER_CONNECTION_MAX = 3

t.test('row 6: one response per pipelining connection per turn; a victim on another connection waits a few, not their pipelines', async (t) => {
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
    const socket = connect({ host: '127.0.0.1', port, localAddress: `127.0.110.${(i % 5) + 1}` })
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
  t.comment(`attacker responses written while a victim request waited: ${waitedBehind.join(' ')} (${ATTACKERS} connections × ${DEPTH} pipelined)`)
  t.ok(worst <= PER_CONNECTION_MAX * ATTACKERS, `at most ${PER_CONNECTION_MAX} per attacking connection (worst ${worst}, ${(worst / ATTACKERS).toFixed(1)} per connection)`)
})
