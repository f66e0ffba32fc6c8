// The connection guard (connection-guard.ts) on the public listener, and the other half of keeping
// one client from holding connections: a client far over its limit — banned, or refused by the
// limiter `closeAfterRejections` times in a row — is answered with `Connection: close`, so a client
// that ignores Retry-After cannot keep its connections open by being refused on them. Both count
// per socket peer (client-address.ts's client: IPv4 address or IPv6 prefix); a trusted proxy's
// peer carries many clients, so neither applies to it (docs/decisions.md §11).
import fp from 'fastify-plugin'
import type { Socket } from 'node:net'
import { Counter, Gauge } from 'prom-client'
import { anonymousClientKey } from './client-address.js'
import { trustFunction, type TrustProxy } from './client-ip.js'
import { guardConnections, type ConnectionGuard, type RefusalReason, type UnusedReason } from './connection-guard.js'
import { shardAccepts } from './accept-shards.js'
import { clientTurns } from './client-turns.js'
import { closeWithTimeout, DEFAULT_ACCEPT_SHARDS, HEAD_TIMEOUT_SWEEP_MS, NEW_CONNECTIONS_PER_CLIENT_PER_TURN, PIPELINED_PER_CLIENT_PER_TURN } from './limits.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** The public listener's open connections, by client. */
    connections: ConnectionGuard
  }
}

export interface ConnectionLimitsOptions {
  maxConnections: number
  maxConnectionsPerClient: number
  /** A connection without a complete request head this long after it opened is closed; 0: never. */
  headTimeoutMs: number
  /** The same while the listener is nearly full. */
  pressureHeadTimeoutMs: number
  /** 429s in a row (per client) after which each further 429 closes its connection. */
  closeAfterRejections: number
  trustProxy: TrustProxy
  /** Default PIPELINED_PER_CLIENT_PER_TURN. */
  pipelinedPerClientPerTurn?: number
  /** Default NEW_CONNECTIONS_PER_CLIENT_PER_TURN. */
  newConnectionsPerClientPerTurn?: number
  /** Listening sockets added beside the listener's own (edge/accept-shards.ts); default DEFAULT_ACCEPT_SHARDS. */
  acceptShards?: number
}

const REASONS: readonly RefusalReason[] = ['client_cap', 'server_cap']
const UNUSED_REASONS: readonly UnusedReason[] = ['head_timeout', 'server_cap']

export const connectionLimitsPlugin = fp<ConnectionLimitsOptions>(async function connectionLimitsPlugin (app, opts) {
  const trusted = trustFunction(opts.trustProxy)
  const registers = app.hasDecorator('metrics') ? [app.metrics.registry] : []
  const refused = new Counter({
    name: 'gateway_connections_refused_total',
    help: 'Connections closed on accept: the client (client_cap) or the listener (server_cap) was at its cap with no idle connection to close',
    labelNames: ['reason'],
    registers
  })
  const reclaimed = new Counter({
    name: 'gateway_connections_reclaimed_total',
    help: 'Idle keep-alive connections closed to make room for a new one, by the cap that was reached',
    labelNames: ['reason'],
    registers
  })
  const closedOverLimit = new Counter({
    name: 'gateway_connections_closed_over_limit_total',
    help: 'Responses that closed their connection because the client was banned or refused too many times in a row',
    registers
  })
  const unusedClosed = new Counter({
    name: 'gateway_connections_unused_closed_total',
    help: 'Connections closed before completing a request: no request head within the deadline (head_timeout), or the oldest such connection closed for a newcomer at the listener\'s cap (server_cap)',
    labelNames: ['reason'],
    registers
  })
  for (const reason of REASONS) {
    refused.inc({ reason }, 0)
    reclaimed.inc({ reason }, 0)
  }
  for (const reason of UNUSED_REASONS) unusedClosed.inc({ reason }, 0)

  const guard = guardConnections(app.server, {
    maxConnections: opts.maxConnections,
    maxConnectionsPerClient: opts.maxConnectionsPerClient,
    headTimeoutMs: opts.headTimeoutMs,
    pressureHeadTimeoutMs: opts.pressureHeadTimeoutMs,
    clientOf: (address) => trusted(address, 0) ? undefined : anonymousClientKey(address, app.gatewayConfig.current.anonymous.ipv6Prefix),
    closeIncomplete: closeWithTimeout,
    onRefused: (reason) => { refused.inc({ reason }) },
    onReclaimed: (reason) => { reclaimed.inc({ reason }) },
    onUnusedClosed: (reason) => { unusedClosed.inc({ reason }) }
  })
  app.decorate('connections', guard)
  const sweeper = setInterval(guard.sweep, HEAD_TIMEOUT_SWEEP_MS)
  sweeper.unref()
  app.addHook('onClose', (_app, done) => {
    clearInterval(sweeper)
    done()
  })
  new Gauge({
    name: 'gateway_connections_open',
    help: 'Connections open on the public listener',
    registers,
    collect () { this.set(guard.open) }
  })
  new Gauge({
    name: 'gateway_connections_unused',
    help: 'Connections open on the public listener that have not completed a request head yet',
    registers,
    collect () { this.set(guard.fresh) }
  })

  // A pipelined request enters when the response before it on its connection is written — in the
  // same turn of the event loop when the kernel took that response at once, so one connection's
  // pipeline used to be answered back to back (60 × 220 KB) before any other connection was read.
  // It waits for a later turn instead, and each turn lets in at most PIPELINED_PER_CLIENT_PER_TURN
  // of one client's: however many connections a client pipelines on, a turn stays short, so a
  // request on another client's connection — or a new connection, which Node accepts one per turn
  // while busy — waits behind a few of its responses, not all of them (issue 39 row 6).
  const pipelined = clientTurns(opts.pipelinedPerClientPerTurn ?? PIPELINED_PER_CLIENT_PER_TURN)
  app.addHook('onRequest', function pipelinedInTurn (request, _reply, done) {
    if (!guard.queuedBehindAnother(request.raw)) {
      done()
      return
    }
    pipelined.later(guard.clientOf(request.raw.socket) ?? request.raw.socket, done)
  })

  // The accept queue is drained faster than one connection per turn (accept-shards.ts); what a
  // client's burst of new connections then costs a turn is bounded too: each new connection is read
  // at once (its 60 pipelined requests parsed, its first answered) only while its client opened
  // fewer than NEW_CONNECTIONS_PER_CLIENT_PER_TURN in this turn; the others stay unread — their
  // head deadline not running — and are read a few per turn, in the order they came.
  shardAccepts(app.server, opts.acceptShards ?? DEFAULT_ACCEPT_SHARDS, (err) => {
    app.log.warn({ err }, 'the listener accepts one connection per turn: its extra listening sockets could not be opened')
  })
  const newConnections = clientTurns(opts.newConnectionsPerClientPerTurn ?? NEW_CONNECTIONS_PER_CLIENT_PER_TURN)
  // After the guard's own listener: a connection it refused is already destroyed.
  app.server.on('connection', function readInTurn (socket: Socket) {
    if (socket.destroyed) return
    const client = guard.clientOf(socket) ?? socket
    if (newConnections.now(client)) return
    // Node starts reading a new connection on the next tick (its HTTP code listens for 'data', which
    // resumes it): it is paused right then, and whenever else it is resumed until its turn comes.
    // ('resume' comes after Node's own handler has started reading, in the same tick: no read
    // happens in between; pausing earlier would leave Node's pending resume to read it.)
    const keepUnread = (): void => { if (!socket.destroyed) socket.pause() }
    socket.on('resume', keepUnread)
    guard.readingDeferred(socket)
    newConnections.later(client, () => {
      socket.off('resume', keepUnread)
      if (socket.destroyed) return
      guard.readingStarts(socket)
      socket.resume()
    })
  })

  app.addHook('onSend', function closeOverLimit (request, reply, payload, done) {
    const decision = request.rateLimit
    const client = decision === null ? undefined : guard.clientOf(request.raw.socket)
    if (decision !== null && client !== undefined) {
      if (decision.allowed) client.rejectionsInRow = 0
      else if (++client.rejectionsInRow >= opts.closeAfterRejections || decision.outcome === 'key_banned') {
        reply.header('connection', 'close')
        closedOverLimit.inc()
      }
    }
    done(null, payload)
  })
}, { name: 'gateway-connection-limits', dependencies: ['gateway-config', 'gateway-limiter'] })
