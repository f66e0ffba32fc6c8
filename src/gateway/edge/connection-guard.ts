// The public listener's connection budget, shared fairly (docs/decisions.md §11). Node's own
// `server.maxConnections` only refuses what comes after the budget is spent, whoever spent it. Here:
// - a connection that has not completed a request head within `headTimeoutMs` is closed — within
//   `pressureHeadTimeoutMs` while the listener is nearly full — so nobody can hold slots by
//   connecting and sending nothing (11 addresses × 920 silent connections held a 10,000 listener);
// - a client (an IPv4 address or an IPv6 prefix: the anonymous limiter's notion, client-address.ts)
//   holding its cap already first gives up its own oldest idle connection; only if all of its
//   connections are busy or unused is the new one refused;
// - a full listener first closes its oldest connection that never completed a request, then its
//   oldest idle keep-alive one; only if every connection is busy is the new one refused (closed on
//   accept, as Node would). So a client that did send requests keeps its connections while anyone
//   squats. A newcomer whose client already holds a connection it has not used is refused rather
//   than given someone else's slot: a squatter reconnecting what it lost would otherwise close the
//   oldest unused connection each time — its own or another's — and cycle through every slot,
//   until the slot a newcomer just took was the oldest before its first request could be read.
// The count is per socket peer, never per X-Forwarded-For entry: a trusted proxy's peer address is
// exempt from the per-client cap (it carries many clients) and counts only in the listener's budget.
import type { IncomingMessage, Server } from 'node:http'
import type { Socket } from 'node:net'
import { performance } from 'node:perf_hooks'

export type RefusalReason = 'client_cap' | 'server_cap'
/** Why a connection that never completed a request was closed: no head in time, or a newcomer at the listener's cap. */
export type UnusedReason = 'head_timeout' | 'server_cap'

/** The listener is "nearly full" from this share of its budget on: the short head deadline applies. */
export const PRESSURE_SHARE = 0.9

/** The connections of one client address (or prefix) and its rate-limit streak. */
export interface ConnectionClient {
  readonly key: string
  readonly sockets: Set<Socket>
  /** Its connections that have not completed a request head yet. */
  unused: number
  /** Responses in a row the limiter refused (429), across the client's connections. */
  rejectionsInRow: number
}

export interface ConnectionGuardOptions {
  /** Open connections the listener keeps at most. */
  maxConnections: number
  /** Open connections one client keeps at most; 0: no per-client cap. */
  maxConnectionsPerClient: number
  /** A connection without a complete request head this long after accept is closed; 0: never. */
  headTimeoutMs: number
  /** The same deadline while the listener is nearly full. */
  pressureHeadTimeoutMs: number
  /** The client a peer address counts as; undefined for a peer exempt from the per-client cap. */
  clientOf: (address: string) => string | undefined
  /** Closes a connection that sent part of a head but not all of it in time (answers 408). */
  closeIncomplete: (socket: Socket) => void
  /** Monotonic ms; tests inject one. */
  now?: () => number
  /** Told of every refused connection, every idle one closed to make room, every unused one closed. */
  onRefused?: (reason: RefusalReason) => void
  onReclaimed?: (reason: RefusalReason) => void
  onUnusedClosed?: (reason: UnusedReason) => void
}

export interface ConnectionGuard {
  /** Connections open now. */
  readonly open: number
  /** Connections open now that have not completed a request head yet. */
  readonly fresh: number
  /** Distinct clients with at least one open connection. */
  readonly clients: number
  /** The client record of an accepted socket; undefined for an exempt peer or a socket not accepted here. */
  clientOf: (socket: Socket) => ConnectionClient | undefined
  /** Closes the connections past their head deadline (the plugin calls it on a timer). */
  sweep: () => void
}

const kClient = Symbol('gateway.connectionClient')
const kAcceptedAt = Symbol('gateway.acceptedAt')

interface GuardedSocket extends Socket {
  [kClient]?: ConnectionClient | null
  [kAcceptedAt]?: number
  _httpMessage?: object | null
}

function isIdle (socket: GuardedSocket): boolean {
  return (socket._httpMessage === null || socket._httpMessage === undefined) && socket.bytesWritten > 0
}

export function guardConnections (server: Server, opts: ConnectionGuardOptions): ConnectionGuard {
  const now = opts.now ?? (() => performance.now())
  /** Every tracked socket, oldest first (a Set keeps insertion order). */
  const all = new Set<GuardedSocket>()
  /** The tracked sockets that have not completed a request head, oldest first. */
  const fresh = new Set<GuardedSocket>()
  const clients = new Map<string, ConnectionClient>()

  /** The connection completed a request head, or is gone. */
  function used (socket: GuardedSocket): void {
    if (!fresh.delete(socket)) return
    const client = socket[kClient]
    if (client !== null && client !== undefined) client.unused--
  }

  function untrack (socket: GuardedSocket): void {
    used(socket)
    if (!all.delete(socket)) return
    const client = socket[kClient]
    if (client === null || client === undefined) return
    client.sockets.delete(socket)
    if (client.sockets.size === 0) clients.delete(client.key)
  }

  function closeUnused (socket: GuardedSocket, reason: UnusedReason): void {
    untrack(socket)
    // Nothing sent: nobody to answer. Part of a head: 408, as Node's own headers timeout does.
    if (socket.bytesRead > 0) opts.closeIncomplete(socket)
    else socket.destroy()
    opts.onUnusedClosed?.(reason)
  }

  /** Closes the oldest idle socket of `sockets`; false when every one is busy or unused. */
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

  /** Closes the oldest connection that never completed a request head; false when there is none. */
  function reclaimUnused (): boolean {
    const oldest = fresh.values().next().value
    if (oldest === undefined) return false
    closeUnused(oldest, 'server_cap')
    return true
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
    if (all.size >= opts.maxConnections &&
      ((client !== undefined && client.unused > 0) || (!reclaimUnused() && !reclaimIdle(all, 'server_cap')))) {
      refuse(socket, 'server_cap')
      return
    }
    if (key !== undefined) {
      // The reclaim above may have closed this client's last socket, and with it its record.
      client = clients.get(key)
      if (client === undefined) {
        client = { key, sockets: new Set(), unused: 0, rejectionsInRow: 0 }
        clients.set(key, client)
      }
      client.sockets.add(socket)
      client.unused++
    }
    socket[kClient] = client ?? null
    socket[kAcceptedAt] = now()
    all.add(socket)
    fresh.add(socket)
    socket.once('close', () => { untrack(socket) })
  })
  // A complete request head: the connection is in use (its requests may still be queued behind others).
  server.on('request', function headCompleted (req: IncomingMessage) {
    used(req.socket as GuardedSocket)
  })

  function sweep (): void {
    const timeout = all.size >= opts.maxConnections * PRESSURE_SHARE ? opts.pressureHeadTimeoutMs : opts.headTimeoutMs
    if (timeout <= 0) return
    const deadline = now() - timeout
    for (const socket of fresh) {
      if ((socket[kAcceptedAt] ?? 0) > deadline) break
      closeUnused(socket, 'head_timeout')
    }
  }

  return {
    get open () { return all.size },
    get fresh () { return fresh.size },
    get clients () { return clients.size },
    clientOf: (socket) => (socket as GuardedSocket)[kClient] ?? undefined,
    sweep
  }
}
