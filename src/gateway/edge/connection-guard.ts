// The public listener's connection budget, shared fairly (docs/decisions.md §11, docs/security.md).
// Node's own `server.maxConnections` only refuses what comes after the budget is spent, whoever spent
// it. Here:
// - a connection that has not completed a request head within `headTimeoutMs` is closed — within
//   `pressureHeadTimeoutMs` while such unused connections fill most of the listener — so nobody can
//   hold slots by connecting and sending nothing (11 addresses × 920 silent connections held a
//   10,000 listener). Only unused connections count toward that pressure: connections that did send
//   a request are not what the short deadline clears, and counting them let an attacker's used, idle
//   connections shorten every newcomer's deadline (10 × 1,000 of them failed a client on a slow link);
// - a client (an IPv4 address or an IPv6 prefix: the anonymous limiter's notion, client-address.ts)
//   holding its cap already first gives up its own least recently active idle connection; only if
//   all of its connections are busy or unused is the new one refused;
// - a full listener takes the slot from the client holding the most connections — its least
//   recently active connection that is unused or idle (among clients holding as many, the least
//   recently active such connection of them all); trusted proxies' connections come last. Only if
//   every connection is busy is the new one refused (closed on accept, as Node would). So a client
//   holding one connection keeps it while anyone holds more, however recently they connected, and
//   "recent" means last used, not accepted. A newcomer whose client already holds a connection it
//   has not used is refused rather than given someone else's slot: a squatter reconnecting what it
//   lost would otherwise cycle through the slots.
// The count is per socket peer, never per X-Forwarded-For entry: a trusted proxy's peer address is
// exempt from the per-client cap (it carries many clients) and counts only in the listener's budget.
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { performance } from 'node:perf_hooks'

export type RefusalReason = 'client_cap' | 'server_cap'
/** Why a connection that never completed a request was closed: no head in time, or a newcomer at the listener's cap. */
export type UnusedReason = 'head_timeout' | 'server_cap'

/** Unused connections holding this share of the budget make the listener "nearly full": the short head deadline applies. */
export const PRESSURE_SHARE = 0.9

/** The connections of one client address (or prefix) and its rate-limit streak. */
export interface ConnectionClient {
  readonly key: string
  /** Least recently active first (a socket moves to the end when it completes a request head or a response). */
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
  /** The same deadline while the listener is nearly full of unused connections. */
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
  /** Whether the request was parsed while an earlier response of its connection was still being answered (pipelined). */
  queuedBehindAnother: (req: IncomingMessage) => boolean
  /**
   * The gateway leaves a new connection unread for now (its client opened more than a turn's share):
   * its head deadline waits until readingStarts.
   */
  readingDeferred: (socket: Socket) => void
  /** Reading a deferred connection begins: its head deadline runs from now. */
  readingStarts: (socket: Socket) => void
}

const kClient = Symbol('gateway.connectionClient')
const kAcceptedAt = Symbol('gateway.acceptedAt')
const kActiveAt = Symbol('gateway.activeAt')
const kQueued = Symbol('gateway.queuedBehindAnother')
const kUnread = Symbol('gateway.readingDeferred')

interface QueuedRequest extends IncomingMessage {
  [kQueued]?: true
}

interface GuardedSocket extends Socket {
  [kClient]?: ConnectionClient | null
  [kAcceptedAt]?: number
  /** When it was accepted, completed a request head or finished a response, whichever was last. */
  [kActiveAt]?: number
  /** Left unread by the gateway: no head deadline yet. */
  [kUnread]?: boolean
  _httpMessage?: object | null
}

function isIdle (socket: GuardedSocket): boolean {
  return (socket._httpMessage === null || socket._httpMessage === undefined) && socket.bytesWritten > 0
}

/** Clients by the number of connections they hold, for "the client holding the most" in O(1) per change. */
interface ClientsBySize {
  add: (client: ConnectionClient, size: number) => void
  remove: (client: ConnectionClient, size: number) => void
  /** Sizes held, largest first. */
  sizesDescending: () => Generator<ReadonlySet<ConnectionClient>>
}

function clientsBySize (): ClientsBySize {
  const buckets = new Map<number, Set<ConnectionClient>>()
  let largest = 0
  return {
    add (client, size) {
      if (size <= 0) return
      let bucket = buckets.get(size)
      if (bucket === undefined) {
        bucket = new Set()
        buckets.set(size, bucket)
      }
      bucket.add(client)
      if (size > largest) largest = size
    },
    remove (client, size) {
      const bucket = buckets.get(size)
      if (bucket === undefined) return
      bucket.delete(client)
      if (bucket.size === 0) buckets.delete(size)
      while (largest > 0 && !buckets.has(largest)) largest--
    },
    * sizesDescending () {
      for (let size = largest; size > 0; size--) {
        const bucket = buckets.get(size)
        if (bucket !== undefined) yield bucket
      }
    }
  }
}

export function guardConnections (server: Server, opts: ConnectionGuardOptions): ConnectionGuard {
  const now = opts.now ?? (() => performance.now())
  /** Every tracked socket. */
  const all = new Set<GuardedSocket>()
  /** The tracked sockets that have not completed a request head, oldest first (a Set keeps insertion order). */
  const fresh = new Set<GuardedSocket>()
  /** Sockets of peers exempt from the per-client cap (trusted proxies), least recently active first. */
  const exempt = new Set<GuardedSocket>()
  const clients = new Map<string, ConnectionClient>()
  const bySize = clientsBySize()

  /** The sockets `socket` is listed in by activity: its client's, or the exempt ones. */
  function activityList (socket: GuardedSocket): Set<Socket> | undefined {
    const client = socket[kClient]
    if (client === null) return exempt
    return client?.sockets
  }

  /** Moves the socket to the most recently active end of its list. */
  function touch (socket: GuardedSocket): void {
    const list = activityList(socket)
    if (list === undefined || !list.delete(socket)) return
    list.add(socket)
    socket[kActiveAt] = now()
  }

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
    if (client === null) exempt.delete(socket)
    if (client === null || client === undefined) return
    bySize.remove(client, client.sockets.size)
    client.sockets.delete(socket)
    bySize.add(client, client.sockets.size)
    if (client.sockets.size === 0) clients.delete(client.key)
  }

  function closeUnused (socket: GuardedSocket, reason: UnusedReason): void {
    untrack(socket)
    // Nothing sent: nobody to answer. Part of a head: 408, as Node's own headers timeout does.
    if (socket.bytesRead > 0) opts.closeIncomplete(socket)
    else socket.destroy()
    opts.onUnusedClosed?.(reason)
  }

  function closeIdle (socket: GuardedSocket, reason: RefusalReason): void {
    untrack(socket)
    socket.destroy()
    opts.onReclaimed?.(reason)
  }

  /** The least recently active idle socket of `sockets` (listed least recently active first). */
  function leastActiveIdle (sockets: Iterable<Socket>): GuardedSocket | undefined {
    for (const socket of sockets as Iterable<GuardedSocket>) if (isIdle(socket)) return socket
    return undefined
  }

  /** The least recently active socket of `sockets` that is unused or idle: one whose slot can be given away. */
  function leastActiveFree (sockets: Iterable<Socket>): GuardedSocket | undefined {
    for (const socket of sockets as Iterable<GuardedSocket>) if (fresh.has(socket) || isIdle(socket)) return socket
    return undefined
  }

  /**
   * Frees one slot of a full listener: from the client holding the most connections (ties: the least
   * recently active candidate among them), its least recently active unused or idle connection;
   * then the trusted proxies'. False when every connection is busy.
   */
  function reclaimForNewcomer (): boolean {
    for (const bucket of bySize.sizesDescending()) {
      let chosen: GuardedSocket | undefined
      for (const client of bucket) {
        const candidate = leastActiveFree(client.sockets)
        if (candidate !== undefined && (chosen === undefined || (candidate[kActiveAt] ?? 0) < (chosen[kActiveAt] ?? 0))) chosen = candidate
      }
      if (chosen !== undefined) {
        release(chosen)
        return true
      }
    }
    const proxied = leastActiveFree(exempt)
    if (proxied === undefined) return false
    release(proxied)
    return true
  }

  function release (socket: GuardedSocket): void {
    if (fresh.has(socket)) closeUnused(socket, 'server_cap')
    else closeIdle(socket, 'server_cap')
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
    if (client !== undefined && opts.maxConnectionsPerClient > 0 && client.sockets.size >= opts.maxConnectionsPerClient) {
      const idle = leastActiveIdle(client.sockets)
      if (idle === undefined) {
        refuse(socket, 'client_cap')
        return
      }
      closeIdle(idle, 'client_cap')
    }
    if (all.size >= opts.maxConnections &&
      ((client !== undefined && client.unused > 0) || !reclaimForNewcomer())) {
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
      bySize.remove(client, client.sockets.size)
      client.sockets.add(socket)
      bySize.add(client, client.sockets.size)
      client.unused++
    } else exempt.add(socket)
    socket[kClient] = client ?? null
    socket[kAcceptedAt] = now()
    socket[kActiveAt] = socket[kAcceptedAt]
    all.add(socket)
    fresh.add(socket)
    socket.once('close', () => { untrack(socket) })
  })
  // A complete request head: the connection is in use (its requests may still be queued behind
  // others); a finished response: it was active until now.
  server.on('request', function headCompleted (req: IncomingMessage, res: ServerResponse) {
    const socket = req.socket as GuardedSocket
    used(socket)
    touch(socket)
    // Node gives the connection to a response at once unless an earlier one still holds it.
    if (res.socket === null) (req as QueuedRequest)[kQueued] = true
    res.once('finish', () => { touch(socket) })
  })

  function sweep (): void {
    const timeout = fresh.size >= opts.maxConnections * PRESSURE_SHARE ? opts.pressureHeadTimeoutMs : opts.headTimeoutMs
    if (timeout <= 0) return
    const deadline = now() - timeout
    for (const socket of fresh) {
      if (socket[kUnread] === true) continue
      if ((socket[kAcceptedAt] ?? 0) > deadline) break
      closeUnused(socket, 'head_timeout')
    }
  }

  function readingStarts (socket: GuardedSocket): void {
    if (socket[kUnread] !== true) return
    socket[kUnread] = false
    if (!fresh.delete(socket)) return
    // Its deadline runs from now: to the end of `fresh`, which stays in deadline order.
    socket[kAcceptedAt] = now()
    fresh.add(socket)
  }

  return {
    get open () { return all.size },
    get fresh () { return fresh.size },
    get clients () { return clients.size },
    clientOf: (socket) => (socket as GuardedSocket)[kClient] ?? undefined,
    sweep,
    queuedBehindAnother: (req) => (req as QueuedRequest)[kQueued] === true,
    readingDeferred: (socket) => { (socket as GuardedSocket)[kUnread] = true },
    readingStarts
  }
}
