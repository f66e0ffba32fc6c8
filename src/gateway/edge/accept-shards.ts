// More than one accept per turn of the event loop. libuv accepts one connection per listening
// socket per loop iteration (since libuv 1.45, "unix: don't accept() connections in a loop"), and
// the kernel's accept queue is first come, first served: a burst of connections — an attacker
// opening 200 at once — put a newcomer behind all of them, and while each turn served big
// responses (30–100 ms under a pipelined flood) it waited for seconds before it was even accepted
// (issue 39 row 6: 6.5 s to accept wrk's 200 connections, the victim's connection behind them).
// Here the public listener is opened with SO_REUSEPORT and `count` more listening sockets join it
// on the same address and port; the kernel spreads new connections over them by a hash of the
// connection's addresses, and each is accepted from in every turn: a burst of N waits about N/(count+1)
// turns, not N. Every connection they accept goes to the HTTP server as its own would (its
// 'connection' event: the connection guard, the timeouts, the shutdown all see it). They stop
// accepting when the server closes, and its close() waits for their connections as for its own.
// Linux only shares a port among sockets of the same user that all set SO_REUSEPORT, and a port
// already taken is refused as before (it is bound alone first). Not in a cluster worker: there the
// primary owns the listener.
import cluster from 'node:cluster'
import type { Server } from 'node:http'
import { createServer, type ListenOptions, type Server as NetServer, type Socket } from 'node:net'

export interface AcceptShards {
  /** Listening sockets added beside the server's own (0 until it listens, or when they could not be opened). */
  readonly open: number
  /** Stops them accepting (the server's own listener is the caller's to close). */
  close: () => void
}

/**
 * Before `server.listen` is called: makes its TCP listen calls use SO_REUSEPORT and, once it
 * listens, opens `count` more listening sockets on its address and port feeding it. `onError` is
 * told once if they cannot be opened (the server then accepts as Node alone does).
 */
export function shardAccepts (server: Server, count: number, onError: (err: Error) => void): AcceptShards {
  const shards: NetServer[] = []
  let closed = false
  const result: AcceptShards = {
    get open () { return shards.filter((s) => s.listening).length },
    close () {
      closed = true
      for (const shard of shards) shard.close()
    }
  }
  if (count <= 0 || cluster.isWorker) return result
  // The server's own count of connections (what its close() waits for) holds only those it accepted:
  // its close() also waits for theirs, so nothing it stops for (the upstream pool) goes first.
  const accepted = new Set<Socket>()
  const drained: Array<() => void> = []
  const close = server.close.bind(server)
  server.close = function closeWithShards (callback?: (err?: Error) => void): Server {
    result.close()
    return close((err?: Error) => {
      if (callback === undefined) return
      if (accepted.size === 0) callback(err)
      else drained.push(() => { callback(err) })
    })
  } as Server['close']
  let reusePort = false
  let backlog: number | undefined
  const listen = server.listen.bind(server) as (...args: unknown[]) => Server
  // Fastify calls listen(options, callback) with { host, port, backlog }: a path (a Unix socket) or a handle is left as it is.
  server.listen = function listenSharingPort (...args: unknown[]): Server {
    const options = args[0]
    if (typeof options !== 'object' || options === null || !('port' in options) || 'path' in options) return listen(...args)
    const { host, port } = options as ListenOptions
    reusePort = true
    backlog = (options as ListenOptions).backlog
    args[0] = { ...(options as ListenOptions), reusePort: true }
    if (port === undefined || Number(port) === 0) return listen(...args)
    // SO_REUSEPORT would also let a second gateway (or anything of the same user) share a port that
    // is already taken, silently splitting its traffic: the port is first bound alone, so a port in
    // use still fails with EADDRINUSE.
    const probe = createServer()
    probe.once('error', (err: Error) => { server.emit('error', err) })
    probe.listen({ host, port, exclusive: true }, () => {
      probe.close(() => { listen(...args) })
    })
    return server
  } as Server['listen']
  server.once('listening', () => {
    const address = server.address()
    if (!reusePort || closed || address === null || typeof address === 'string') return
    const { address: host, port } = address
    let reported = false
    for (let i = 0; i < count; i++) {
      const shard = createServer((socket: Socket) => {
        if (closed) {
          socket.destroy()
          return
        }
        accepted.add(socket)
        socket.once('close', () => {
          accepted.delete(socket)
          if (accepted.size === 0) for (const done of drained.splice(0)) done()
        })
        // As if the server had accepted it: Node's HTTP code (which sets socket.server) and every listener of its 'connection'.
        server.emit('connection', socket)
      })
      shard.on('error', (err: Error) => {
        shard.close()
        if (reported) return
        reported = true
        onError(err)
      })
      shard.listen({ host, port, backlog, reusePort: true })
      shards.push(shard)
    }
  })
  return result
}
