// The request path to the backend, as @fastify/http-proxy's `handler`: http-proxy keeps routing,
// prefix rewriting and the destination checks (dot-segments, absolute URLs), and this replaces
// @fastify/reply-from's generic `reply.from` with what this gateway needs per request — one header
// copy (the policy of request-headers.ts), one undici call through the upstream gate, the status
// and the end-to-end headers copied onto the reply, the body streamed. What reply-from would do
// besides, and this gateway does not need, is left out: two more copies of the request headers, a
// URL parsed and cached per destination, retry closures (and its silent retries of a GET the
// backend answered 503), the Connection-header scan done twice, every response header rewritten
// through a regular expression (undici's parser already refuses invalid header bytes). The measured
// difference is in bench/results/proxy-path.md.
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Dispatcher, Pool } from 'undici'
import { gatewayErrors, requestErrors } from '../../interface/errors.js'
import { limiterId } from '../limiter/consumer-id.js'
import { startUpstreamTimer, stopUpstreamTimer } from '../observability/metrics/upstream-timing.js'
import { holdUntilOver } from '../edge/request-holds.js'
import { backendRequestHeaders, isResponseHopByHop } from './request-headers.js'
import type { UpstreamGate, UpstreamShedReason, UpstreamWaiter } from './upstream-gate.js'
import { upstreamError } from './upstream-errors.js'

export interface ForwardOptions {
  pool: Pool
  gate: UpstreamGate
  /** `host` of the backend, sent as the request's Host. */
  host: string
  /** The gate's clock, performance.now() (dispatch times are on it, and a traced call's start). */
  now: () => number
}

export type ProxyHandler = (request: FastifyRequest, reply: FastifyReply, dest: string) => void

/**
 * One request on its way to the backend: waits at the gate, then is sent, answered and released.
 * Its backend connection is the gate's until release(), and release() has one caller: the end of
 * the upstream exchange (undici's answer failed, or the answer's body closed — read to its end or
 * destroyed). The client's response ending first (a reset before, during or after dispatch) takes
 * a queued call out of the queue, and aborts a dispatched one, which ends it the same way
 * (request-holds.ts owns that): whatever way out a request takes, its queue place or its connection
 * comes back, once.
 */
class UpstreamCall implements UpstreamWaiter {
  enteredAt = 0
  #dispatched = false
  #dispatchedAt = 0
  #released = false
  readonly #abort = new AbortController()
  private readonly opts: ForwardOptions
  private readonly request: FastifyRequest
  private readonly reply: FastifyReply
  private readonly path: string
  /** Its consumer, or its client address as the limiter counts it: the gate serves them in turn. */
  readonly lane: string

  constructor (opts: ForwardOptions, request: FastifyRequest, reply: FastifyReply, path: string, lane: string) {
    this.opts = opts
    this.request = request
    this.reply = reply
    this.path = path
    this.lane = lane
  }

  abandoned (): boolean {
    return this.reply.raw.destroyed
  }

  shed (_reason: UpstreamShedReason, retryAfterSeconds: number): void {
    this.reply.send(gatewayErrors.upstreamBusy(retryAfterSeconds))
  }

  failed (err: unknown): void {
    this.request.log.error({ err }, 'upstream request not sent')
    if (!this.reply.sent) this.reply.send(requestErrors.internal())
  }

  dispatch (remainingMs: number): void {
    const request = this.request
    const headers = backendRequestHeaders(request, request.headers, this.opts.host)
    let body: string | undefined
    // proxyPayloads is off: Fastify parsed (and checked) the JSON body; it is sent as parsed.
    if (request.body !== undefined && request.body !== null) {
      body = JSON.stringify(request.body)
      headers['content-type'] = 'application/json'
      headers['content-length'] = String(Buffer.byteLength(body))
    }
    const trace = request.trace
    if (trace?.sampled === true) {
      // The wait at the gate is the wait for a connection: the upstream span starts there (tracing/upstream-spans.ts).
      trace.upstreamQueuedAt = this.enteredAt
    } else if (trace !== null) {
      // A trace the sampler left out has no upstream span: its ids go to the backend from here.
      headers.traceparent = trace.traceparent
      if (trace.tracestate !== undefined) headers.tracestate = trace.tracestate
    }
    this.#dispatched = true
    this.#dispatchedAt = this.opts.now()
    startUpstreamTimer(request)
    this.opts.pool.request({
      path: this.path,
      method: request.method as Dispatcher.HttpMethod,
      headers,
      body,
      headersTimeout: Math.ceil(remainingMs),
      signal: this.#abort.signal
    }, (err, data) => { this.#answered(err, data) })
  }

  /**
   * The client's response is over (request-holds.ts calls this once, however it ended). Still
   * queued: the call leaves the queue, its place free at once. Holding a connection: the call is
   * cancelled, which ends it and gives the connection back. A call already over is not aborted:
   * abort() builds a DOMException with its stack, 8 % of a hot key's CPU when it ran at the end of
   * every request (bench:profile).
   */
  over (): void {
    if (!this.#dispatched) this.opts.gate.leave(this)
    else if (!this.#released) this.#abort.abort()
  }

  #release (): void {
    if (this.#released) return
    this.#released = true
    this.opts.gate.release(this.#dispatchedAt)
  }

  #answered (err: Error | null, data: Dispatcher.ResponseData): void {
    if (err !== null) {
      this.#release()
      stopUpstreamTimer(this.request)
      this.#relayFailure(err)
      return
    }
    const body = data.body
    // The connection is the backend's again once the body is read to its end (or dropped).
    body.once('close', () => { this.#release() })
    stopUpstreamTimer(this.request)
    try {
      this.#relay(data)
    } catch (relayErr) {
      body.destroy()
      this.#relayFailure(relayErr)
    }
  }

  #relayFailure (err: unknown): void {
    // A call the client's departure cancelled has nobody to answer.
    if (this.reply.raw.destroyed || this.reply.sent) return
    this.request.log.warn({ err }, 'upstream request failed')
    this.reply.send(upstreamError(err))
  }

  #relay (data: Dispatcher.ResponseData): void {
    const reply = this.reply
    const body = data.body
    if (reply.raw.destroyed) {
      body.destroy()
      return
    }
    try {
      reply.code(data.statusCode)
    } catch {
      // A status Fastify cannot send (outside 100–599): the backend's answer is not HTTP we can relay.
      body.destroy()
      reply.send(gatewayErrors.upstreamUnavailable())
      return
    }
    const headers = data.headers
    for (const name in headers) {
      const value = headers[name]
      if (value !== undefined && !isResponseHopByHop(name)) reply.header(name, value)
    }
    reply.send(body)
  }
}

/** The `handler` of every @fastify/http-proxy route: `dest` is the rewritten, checked path (no query). */
export function createForwarder (opts: ForwardOptions): ProxyHandler {
  return function forward (request, reply, dest) {
    const url = request.url
    const query = url.indexOf('?')
    const lane = limiterId(request.consumer, request.ip, request.snapshot.anonymous.ipv6Prefix)
    const call = new UpstreamCall(opts, request, reply, query === -1 ? dest : dest + url.slice(query), lane)
    opts.gate.enter(call)
    // One owner, whatever happened in enter (dispatched, queued or shed): the response's end releases the call.
    holdUntilOver(reply.raw, () => { call.over() })
  }
}
