// The public listener's connection budget, shared fairly. Node's own `server.maxConnections` only
// refuses what comes after the budget is spent, whoever spent it: one client opening thousands of
// keep-alive connections and leaving them idle locked every other client out for the whole
// keep-alive timeout. Here, on every accepted socket:
// - a client (an IPv4 address or an IPv6 prefix: the anonymous limiter's notion, client-address.ts)
//   holding its cap already first gives up its own oldest idle connection; only if all of its
//   connections are busy is the new one refused;
// - a full listener first closes its oldest idle keep-alive connection, whoever holds it; only if
//   every connection is busy is the new one refused (closed on accept, as Node would).
// The count is per socket peer, never per X-Forwarded-For entry: a trusted proxy's peer address is
// exempt from the per-client cap (it carries many clients) and counts only in the listener's budget.
// "Idle" is a keep-alive connection between requests: answered at least once, no response in
// progress. A connection not answered yet is never taken: its first request may be on its way (a
// client opening many connections at once would otherwise have them closed under it); one that
// never sends is the headers timeout's to close.
import type { Server } from 'node:http'
import type { Socket } from 'node:net'

export type RefusalReason = 'client_cap' | 'server_cap'

/** The connections of one client address (or prefix) and its rate-limit streak. */
export interface ConnectionClient {
  readonly key: string
  readonly sockets: Set<Socket>
  /** Responses in a row the limiter refused (429), across the client's connections. */
  rejectionsInRow: number
}

export interface ConnectionGuardOptions {
  /** Open connections the listener keeps at most. */
  maxConnections: number
  /** Open connections one client keeps at most; 0: no per-client cap. */
  maxConnectionsPerClient: number
  /** The client a peer address counts as; undefined for a peer exempt from the per-client cap. */
  clientOf: (address: string) => string | undefined
  /** Told of every refused connection and every idle one closed to make room. */
  onRefused?: (reason: RefusalReason) => void
  onReclaimed?: (reason: RefusalReason) => void
}

export interface ConnectionGuard {
  /** Connections open now. */
  readonly open: number
  /** Distinct clients with at least one open connection. */
  readonly clients: number
  /** The client record of an accepted socket; undefined for an exempt peer or a socket not accepted here. */
  clientOf: (socket: Socket) => ConnectionClient | undefined
}

const kClient = Symbol('gateway.connectionClient')

interface GuardedSocket extends Socket {
  [kClient]?: ConnectionClient | null
  _httpMessage?: object | null
}

function isIdle (socket: GuardedSocket): boolean {
  return (socket._httpMessage === null || socket._httpMessage === undefined) && socket.bytesWritten > 0
}

export function guardConnections (server: Server, opts: ConnectionGuardOptions): ConnectionGuard {
  /** Every tracked socket, oldest first (a Set keeps insertion order). */
  const all = new Set<GuardedSocket>()
  const clients = new Map<string, ConnectionClient>()

  function untrack (socket: GuardedSocket): void {
    if (!all.delete(socket)) return
    const client = socket[kClient]
    if (client === null || client === undefined) return
    client.sockets.delete(socket)
    if (client.sockets.size === 0) clients.delete(client.key)
  }

  /** Closes the oldest idle socket of `sockets`; false when every one is busy. */
  function reclaimIdle (sockets: Iterable<GuardedSocket>, reason: RefusalReason): boolean {
    for (const socket of sockets) {
      if (!isIdle(socket)) continue
      untrack(socket)
      socket.destroy()
      opts.onReclaimed?.(reason)
      return true
    }
    return false
  }

  function refuse (socket: GuardedSocket, reason: RefusalReason): void {
    socket.destroy()
    opts.onRefused?.(reason)
  }

  // Added after Node's own connection listener: the socket is fully set up, so a refusal's
  // destroy() goes through Node's usual cleanup.
  server.on('connection', function guardConnection (socket: GuardedSocket) {
    const address = socket.remoteAddress
    const key = address === undefined ? undefined : opts.clientOf(address)
    let client = key === undefined ? undefined : clients.get(key)
    if (client !== undefined && opts.maxConnectionsPerClient > 0 && client.sockets.size >= opts.maxConnectionsPerClient &&
      !reclaimIdle(client.sockets as Set<GuardedSocket>, 'client_cap')) {
      refuse(socket, 'client_cap')
      return
    }
    if (all.size >= opts.maxConnections && !reclaimIdle(all, 'server_cap')) {
      refuse(socket, 'server_cap')
      return
    }
    if (key !== undefined) {
      // The reclaim above may have closed this client's last socket, and with it its record.
      client = clients.get(key)
      if (client === undefined) {
        client = { key, sockets: new Set(), rejectionsInRow: 0 }
        clients.set(key, client)
      }
      client.sockets.add(socket)
    }
    socket[kClient] = client ?? null
    all.add(socket)
    socket.once('close', () => { untrack(socket) })
  })

  return {
    get open () { return all.size },
    get clients () { return clients.size },
    clientOf: (socket) => (socket as GuardedSocket)[kClient] ?? undefined
  }
}
