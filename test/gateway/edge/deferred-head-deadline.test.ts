// A connection the gateway leaves unread (its client opened more new connections in one turn than
// it reads: edge/connection-limits.ts) is not closed for sending no head in time: it could not
// have — nothing of it was read. Its head deadline runs from when reading starts. The connection
// guard on a real listener and real sockets, its clock injected.
import { createServer, type Server } from 'node:http'
import { connect, type Socket } from 'node:net'
import t, { type Test } from 'tap'
import { guardConnections } from '../../../src/gateway/edge/connection-guard.js'

const HEAD_TIMEOUT_MS = 1_000

async function listening (t: Test): Promise<{ server: Server, port: number }> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.closeAllConnections(); server.close() })
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no port')
  return { server, port: address.port }
}

async function accepted (t: Test, server: Server, port: number): Promise<Socket> {
  const gotIt = new Promise<Socket>((resolve) => server.once('connection', resolve))
  const client = connect({ host: '127.0.0.1', port })
  client.on('error', () => {})
  t.teardown(() => client.destroy())
  return await gotIt
}

t.test('an unread connection keeps its slot past the head deadline; the deadline runs once reading starts', async (t) => {
  const { server, port } = await listening(t)
  let clock = 0
  const closed: string[] = []
  const guard = guardConnections(server, {
    maxConnections: 100,
    maxConnectionsPerClient: 0,
    headTimeoutMs: HEAD_TIMEOUT_MS,
    pressureHeadTimeoutMs: HEAD_TIMEOUT_MS,
    clientOf: (address) => address,
    closeIncomplete: (socket) => { socket.destroy() },
    now: () => clock,
    onUnusedClosed: (reason) => { closed.push(reason) }
  })
  const deferred = await accepted(t, server, port)
  const ordinary = await accepted(t, server, port)
  guard.readingDeferred(deferred)

  clock += 5 * HEAD_TIMEOUT_MS
  guard.sweep()
  t.ok(ordinary.destroyed, 'a connection that sent no head within the deadline is closed')
  t.notOk(deferred.destroyed, 'the unread one is not, however long it waited')
  t.same(closed, ['head_timeout'])

  guard.readingStarts(deferred)
  clock += HEAD_TIMEOUT_MS / 2
  guard.sweep()
  t.notOk(deferred.destroyed, 'once read, it has the whole deadline from then')
  clock += HEAD_TIMEOUT_MS
  guard.sweep()
  t.ok(deferred.destroyed, 'and is closed when that passes without a head')
  t.same(closed, ['head_timeout', 'head_timeout'])
  t.equal(guard.open, 0)
})
