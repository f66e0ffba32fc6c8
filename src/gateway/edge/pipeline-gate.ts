// HTTP/1.1 pipelining without letting one connection starve the others (docs/decisions.md §11).
// Node's parser reads whatever a connection sent and hands every request in it to the server at
// once: 256 connections × 32 pipelined requests were 8,192 requests in the gateway together, and a
// client on another connection waited seconds behind them. In front of Fastify's handler here:
// - a connection's requests are processed one at a time, in order: a request enters the gateway
//   when its response owns the connection, that is when the one before it has been written (as
//   nginx and Go's server do). Node already queues the responses in that order;
// - reading the connection stops while `depth` of its requests are parsed and unanswered, so a
//   client sending more cannot have them parsed ahead; what one read already held waits, parsed by
//   Node but not processed. A read holding more than `maxParsed` requests closes the connection at
//   once (no client pipelines that deep; RFC 9112 §9.3.2: unanswered requests are retried);
// - a request whose connection is gone is never processed: the requests a reset connection had
//   pipelined cost nothing more, and a request in the gateway always has its connection, so its
//   response's 'close' event comes (the in-flight counts rely on it);
// - load shedding can hold a connection (holdConnection): unread and its next request unprocessed
//   until the hold ends.
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { holdUntilOver } from './request-holds.js'

/** Requests of one connection parsed and not yet answered at which reading it stops. */
export const DEFAULT_PIPELINE_DEPTH = 4
/**
 * At least 2: the request in progress counts among them, and its body may still be on the wire —
 * reading must go on while it alone is unanswered (a request parsed after it proves its body is in).
 */
export const MIN_PIPELINE_DEPTH = 2
/** More than this many parsed and unanswered on one connection (one read held them): it is closed. */
export const DEFAULT_PIPELINE_MAX_PARSED = 64

export interface PipelineGateOptions {
  depth: number
  maxParsed: number
}

export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => void

/** One connection's requests: how many are parsed and unanswered, and a hold on it. */
interface Lane {
  readonly depth: number
  pending: number
  /** The gate stopped reading (not Node's own back-pressure pause). */
  paused: boolean
  held: boolean
  /** The request whose turn came during a hold: processed when the hold ends. */
  deferred: (() => void) | undefined
}

const kLane = Symbol('gateway.pipelineLane')

interface LaneSocket extends Socket {
  [kLane]?: Lane
}

function pause (socket: LaneSocket, lane: Lane): void {
  if (lane.paused) return
  lane.paused = true
  socket.pause()
}

function laneOf (socket: LaneSocket, depth: number): Lane {
  let lane = socket[kLane]
  if (lane !== undefined) return lane
  const created: Lane = { depth, pending: 0, paused: false, held: false, deferred: undefined }
  // Node resumes a socket on its own whenever a request's body is read or dumped (every answered
  // request): reading stays stopped while the gate holds it. ('resume' comes after Node's own
  // handler has restarted reading, in the same tick: no read happens in between.)
  socket.on('resume', () => { if (created.paused && !socket.destroyed) socket.pause() })
  lane = created
  socket[kLane] = lane
  return lane
}

function resumeIfFree (socket: LaneSocket, lane: Lane): void {
  if (!lane.paused || lane.held || lane.pending >= lane.depth || socket.destroyed) return
  lane.paused = false
  // Node's own pause for write back-pressure stays: its 'resume' handler re-pauses while it holds one.
  socket.resume()
}

/** Fastify's request handler behind the gate: give the result to the HTTP server. */
export function gateRequests (handle: RequestHandler, opts: PipelineGateOptions): RequestHandler {
  return function gatedRequest (req, res) {
    const socket = req.socket as LaneSocket
    const lane = laneOf(socket, opts.depth)
    if (++lane.pending > opts.maxParsed) {
      socket.destroy()
      return
    }
    // Every response that got the connection closes (written, or the connection gone); one that
    // never got it dies with the connection, and the lane with it.
    holdUntilOver(res, () => {
      lane.pending--
      resumeIfFree(socket, lane)
    })
    if (lane.pending >= lane.depth) pause(socket, lane)
    // Node gives the connection to a response once the responses before it are written.
    if (res.socket !== null && !lane.held) {
      handle(req, res)
      return
    }
    const run = (): void => {
      if (socket.destroyed) return
      if (lane.held) lane.deferred = run
      else handle(req, res)
    }
    if (res.socket !== null) run()
    else res.once('socket', run)
  }
}

/**
 * Leaves `socket` unread, and its next request unprocessed, for `ms`. Called when a request on it
 * is shed: the client was told to retry after that long.
 */
export function holdConnection (socket: Socket, ms: number): void {
  const lane = (socket as LaneSocket)[kLane]
  if (lane === undefined || socket.destroyed || lane.held) return
  lane.held = true
  pause(socket, lane)
  setTimeout(() => {
    lane.held = false
    const next = lane.deferred
    lane.deferred = undefined
    if (next !== undefined) next()
    resumeIfFree(socket, lane)
  }, ms).unref()
}
