// The public listener's limits, chosen deliberately rather than inherited from Node or Fastify
// defaults, and the handler that answers what Node's HTTP parser rejects before Fastify sees a
// request (bad bytes, oversized headers, a request not received in time) with the Error shape
// instead of Fastify's own body, without ever logging the raw packet (it may hold an Authorization
// header).
import { randomUUID } from 'node:crypto'
import { createServer, type Server, type ServerOptions } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { gatewayErrors, rawErrorResponse, type ApiError } from '../../interface/errors.js'
import { DEFAULT_PIPELINE_DEPTH, DEFAULT_PIPELINE_MAX_PARSED, gateRequests, type RequestHandler } from './pipeline-gate.js'
import { rememberPeerAddresses } from './peer-address.js'
import { frameworkErrors } from './request-screen.js'

/** Node's own default, stated: a 20 KB bearer token or a flood of headers is refused 431 by the parser. */
export const DEFAULT_MAX_HEADER_BYTES = 16 * 1024
/** Headers must arrive within this (slowloris); Node checks every `connectionsCheckingInterval`. */
export const DEFAULT_HEADERS_TIMEOUT_MS = 10_000
/** The whole request (headers and body) must arrive within this, else 408. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000
/** How often Node looks for connections over the two timeouts above. */
export const DEFAULT_CONNECTIONS_CHECKING_INTERVAL_MS = 1_000
/** Idle keep-alive sockets are kept longer than common load-balancer idle timeouts (60 s), so the LB closes first. */
export const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 72_000
/** Backstop on a silent socket during a request; longer than the request and upstream timeouts, so it never cuts a live one. */
export const DEFAULT_CONNECTION_TIMEOUT_MS = 60_000
/**
 * No cap on requests per keep-alive connection (0, Node's default): with a cap, Node answers a bare
 * 503 — not the Error shape, no rate-limit headers — to a request that races the `Connection: close`
 * of the last allowed one. Rebalancing connections is the load balancer's job.
 */
export const DEFAULT_MAX_REQUESTS_PER_SOCKET = 0
/**
 * Open connections the listener keeps (MAX_CONNECTIONS): bounded memory and file descriptors. At the
 * cap the client holding the most connections gives up its least recently active unused or idle one
 * for a new one; only when every one is busy is the new one closed on accept
 * (edge/connection-guard.ts).
 */
export const DEFAULT_MAX_CONNECTIONS = 10_000
/**
 * Open connections one client (IPv4 address, IPv6 prefix) keeps (MAX_CONNECTIONS_PER_CLIENT; 0: no
 * cap): about a tenth of the listener's budget, so no client can take it, while a load generator or
 * a busy service at a thousand concurrent requests from one address still fits. A trusted proxy's
 * peer address is exempt.
 */
export const DEFAULT_MAX_CONNECTIONS_PER_CLIENT = 1_024
/**
 * A connection that has not completed a request head this long after it opened is closed
 * (HEAD_TIMEOUT_MS; 0: only Node's headers timeout): a client sends its request as soon as it is
 * connected, so a silent connection only holds a slot (edge/connection-guard.ts).
 */
export const DEFAULT_HEAD_TIMEOUT_MS = 5_000
/** The same deadline while unused connections hold 90 % of MAX_CONNECTIONS or more (PRESSURE_HEAD_TIMEOUT_MS). */
export const DEFAULT_PRESSURE_HEAD_TIMEOUT_MS = 1_000
/**
 * How often connections are checked against those deadlines: often, so that the connections closed
 * together are few — a squatter reopens each at once, and thousands of SYNs in one instant overflow
 * the accept queue for everyone.
 */
export const HEAD_TIMEOUT_SWEEP_MS = 100
/**
 * The public listener's accept queue (Node's default is 511): a burst of new connections — a
 * client's pool opening, a squatter reopening what was closed — waits in the kernel instead of
 * being dropped, which costs a client a 1 s SYN retry. The kernel caps it at net.core.somaxconn.
 */
export const DEFAULT_LISTEN_BACKLOG = 4096
/**
 * Pipelined requests of one client (its address or IPv6 prefix; a trusted proxy's connection on its
 * own) that enter the gateway per turn of the event loop; the rest wait for the next turns
 * (edge/connection-limits.ts). A turn serving 200 connections' pipelined 220 KB responses takes
 * long enough that Node, which accepts one new connection per turn while busy, left newcomers in
 * the accept queue for seconds.
 */
export const PIPELINED_PER_CLIENT_PER_TURN = 4
/**
 * New connections of one client read per turn (edge/connection-limits.ts): the rest of a burst stays
 * unread for the next turns, so a client opening hundreds at once costs a turn a few of them.
 */
export const NEW_CONNECTIONS_PER_CLIENT_PER_TURN = 4
/**
 * Listening sockets that join the public listener on its port (SO_REUSEPORT, edge/accept-shards.ts):
 * libuv accepts one connection per listening socket per turn, so a burst of N new connections
 * waits about N / (this + 1) turns to be accepted instead of N.
 */
export const DEFAULT_ACCEPT_SHARDS = 63
/** After this many 429s in a row a client's further 429s close their connection (a ban's at once). */
export const DEFAULT_CLOSE_AFTER_REJECTIONS = 10
/** Path parameters (pet id) longer than this are 400, counted like any request (edge/request-screen.ts). */
export const DEFAULT_MAX_PARAM_LENGTH = 100
/** JSON bodies nested deeper than this are 400: the Pet body is flat, and deep nesting overflows the parser's stack (500). */
export const DEFAULT_MAX_JSON_DEPTH = 32
const CLIENT_ERROR_FLUSH_MS = 1_000
const IN_FLIGHT_FLUSH_MS = 15_000

export interface ServerLimits {
  maxHeaderBytes: number
  headersTimeoutMs: number
  requestTimeoutMs: number
  connectionsCheckingIntervalMs: number
  keepAliveTimeoutMs: number
  connectionTimeoutMs: number
  maxRequestsPerSocket: number
  maxConnections: number
  maxConnectionsPerClient: number
  headTimeoutMs: number
  pressureHeadTimeoutMs: number
  closeAfterRejections: number
  maxParamLength: number
  /** Requests of one connection parsed and unanswered at which reading it stops (edge/pipeline-gate.ts). */
  pipelineDepth: number
  /** More parsed and unanswered on one connection than this: it is closed. */
  pipelineMaxParsed: number
}

export const DEFAULT_SERVER_LIMITS: Readonly<ServerLimits> = Object.freeze({
  maxHeaderBytes: DEFAULT_MAX_HEADER_BYTES,
  headersTimeoutMs: DEFAULT_HEADERS_TIMEOUT_MS,
  requestTimeoutMs: DEFAULT_REQUEST_TIMEOUT_MS,
  connectionsCheckingIntervalMs: DEFAULT_CONNECTIONS_CHECKING_INTERVAL_MS,
  keepAliveTimeoutMs: DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
  connectionTimeoutMs: DEFAULT_CONNECTION_TIMEOUT_MS,
  maxRequestsPerSocket: DEFAULT_MAX_REQUESTS_PER_SOCKET,
  maxConnections: DEFAULT_MAX_CONNECTIONS,
  maxConnectionsPerClient: DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
  headTimeoutMs: DEFAULT_HEAD_TIMEOUT_MS,
  pressureHeadTimeoutMs: DEFAULT_PRESSURE_HEAD_TIMEOUT_MS,
  closeAfterRejections: DEFAULT_CLOSE_AFTER_REJECTIONS,
  maxParamLength: DEFAULT_MAX_PARAM_LENGTH,
  pipelineDepth: DEFAULT_PIPELINE_DEPTH,
  pipelineMaxParsed: DEFAULT_PIPELINE_MAX_PARSED
})

export function serverLimits (overrides: Partial<ServerLimits> = {}): ServerLimits {
  return { ...DEFAULT_SERVER_LIMITS, ...overrides }
}

/**
 * The public listener: Node's HTTP server as Fastify would make it, with the limits set, each
 * connection's peer address fixed on accept (edge/peer-address.ts), and Fastify's handler behind
 * the pipeline gate (edge/pipeline-gate.ts).
 */
function gatedServer (limits: ServerLimits, handler: RequestHandler): Server {
  const options: ServerOptions = {
    maxHeaderSize: limits.maxHeaderBytes,
    // Node requires headersTimeout ≤ requestTimeout.
    headersTimeout: Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs),
    requestTimeout: limits.requestTimeoutMs,
    connectionsCheckingInterval: limits.connectionsCheckingIntervalMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs
  }
  const server = createServer(options, gateRequests(handler, { depth: limits.pipelineDepth, maxParsed: limits.pipelineMaxParsed }))
  // A request's client address is its connection's, fixed on accept: never read from a socket that may be gone.
  rememberPeerAddresses(server)
  server.setTimeout(limits.connectionTimeoutMs)
  if (limits.maxRequestsPerSocket > 0) server.maxRequestsPerSocket = limits.maxRequestsPerSocket
  return server
}

/** The Fastify server options that carry the limits (the connection caps are edge/connection-limits.ts's). */
export function fastifyLimitOptions (limits: ServerLimits) {
  return {
    serverFactory: (handler: RequestHandler) => gatedServer(limits, handler),
    // Fastify's own reading of these (its timeouts of a request, its close) matches the server's.
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionTimeout: limits.connectionTimeoutMs,
    maxRequestsPerSocket: limits.maxRequestsPerSocket,
    clientErrorHandler,
    // Router rejections (bad percent-encoding, over-long parameters) go through the hooks as well.
    frameworkErrors
  }
}

/** Deepest bracket nesting outside strings, stopping early past `limit`: linear, no recursion. */
export function jsonDepthOver (text: string, limit: number): boolean {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c) i++
      else if (c === 0x22) inString = false
    } else if (c === 0x22) inString = true
    else if (c === 0x7b || c === 0x5b) { if (++depth > limit) return true } else if (c === 0x7d || c === 0x5d) depth--
  }
  return false
}

/** Fastify's JSON parser (prototype-poisoning checks included) behind a nesting-depth check. */
export function installJsonParser (app: FastifyInstance, maxDepth = DEFAULT_MAX_JSON_DEPTH): void {
  const parse = app.getDefaultJsonParser('error', 'error')
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'string' }, function parseJson (request, body, done) {
    const text = typeof body === 'string' ? body : body.toString('utf8')
    if (jsonDepthOver(text, maxDepth)) {
      done(gatewayErrors.jsonTooDeep(maxDepth), undefined)
      return
    }
    parse(request, text, done)
  })
}

/** Node destroys a CONNECT request's socket without a word when nobody listens for it: answer 405 instead. */
export function refuseConnect (server: Server): void {
  server.on('connect', (_req, socket: Socket) => {
    writeRaw(socket, gatewayErrors.connectNotAllowed())
  })
}

/** Answers `408 request_timeout` on a connection whose request head did not arrive in time, and closes it. */
export function closeWithTimeout (socket: Socket): void {
  writeRaw(socket, gatewayErrors.requestTimeout())
}

function writeRaw (socket: Socket, error: ApiError): void {
  socket.end(rawErrorResponse(error, randomUUID()), () => socket.destroy())
  // A peer that never reads must not keep the socket: the reply gets a second to flush.
  setTimeout(() => socket.destroy(), CLIENT_ERROR_FLUSH_MS).unref()
}

function parserError (code: string | undefined): ApiError {
  if (code === 'HPE_HEADER_OVERFLOW') return gatewayErrors.headersTooLarge()
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return gatewayErrors.requestTimeout()
  return gatewayErrors.notHttp()
}

interface SocketWithMessage extends Socket {
  _httpMessage?: (NodeJS.EventEmitter & { headersSent?: boolean, writableFinished?: boolean }) | null
}

/**
 * Fastify's `clientErrorHandler`: answers a request Node's parser refused with the Error shape and an
 * `x-request-id`, then closes the connection. The error's `rawPacket` (request bytes, possibly a key)
 * is never logged: only its code.
 */
export function clientErrorHandler (this: FastifyInstance, err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return
  // The peer ended its side in the middle of a request: the request can never complete, so the
  // socket is freed now rather than held for an answer nobody can finish.
  if (err.code === 'HPE_INVALID_EOF_STATE') {
    socket.destroy()
    return
  }
  const error = parserError(err.code)
  this.log.debug({ code: err.code, status: error.status }, 'client error')
  const responding = (socket as SocketWithMessage)._httpMessage
  if (responding !== undefined && responding !== null && responding.writableFinished !== true) {
    // Garbage pipelined behind a request still being answered: let that answer finish, then close.
    responding.once('close', () => socket.destroy())
    setTimeout(() => socket.destroy(), IN_FLIGHT_FLUSH_MS).unref()
    return
  }
  if (socket.writable) {
    writeRaw(socket, error)
    return
  }
  socket.destroy()
}
