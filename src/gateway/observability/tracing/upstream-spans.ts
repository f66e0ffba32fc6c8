// The upstream call's spans of a sampled trace and the `traceparent` the backend then receives (an
// unsampled trace's is added by the forwarder, proxy/forward.ts), from undici's diagnostics channels rather than from the proxy plugin: `undici:request:create` fires as the proxy creates its
// request (the gateway's `x-request-id` among its headers says whose it is), and lets the header be
// added; the call and its wait for a connection start earlier, when the request began to wait at the
// proxy's upstream gate (SampledTrace.upstreamQueuedAt); `undici:client:sendHeaders` marks the moment
// a connection carried it, ending that wait; response headers, the end of the body, or an error close the call.
// The channels are process-wide: every gateway in a process sees every undici request, and keeps only
// those it is waiting for. Loaded only with tracing on.
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import { SpanKind, SpanStatusCode, trace, type HrTime, type Span, type Tracer } from '@opentelemetry/api'
import {
  ATTR_ERROR_TYPE, ATTR_HTTP_REQUEST_METHOD, ATTR_HTTP_RESPONSE_STATUS_CODE, ATTR_SERVER_ADDRESS, ATTR_SERVER_PORT, ATTR_URL_FULL
} from '@opentelemetry/semantic-conventions'
import { formatTraceparent } from '../../../shared/tracing/traceparent.js'
import { ATTR_UPSTREAM_NEW_CONNECTION } from './attributes.js'
import type { SampledTrace } from './request-trace.js'

/**
 * Requests waiting for their upstream call, at most: an entry normally leaves with its response; this
 * bound only matters for requests whose response never finished (a client that went away), so that
 * they cannot grow the table. Above the public listener's default connection limit.
 */
export const DEFAULT_MAX_WAITING = 20_000
const REQUEST_ID_HEADER = 'x-request-id'
const CHANNELS = ['undici:request:create', 'undici:client:sendHeaders', 'undici:request:headers', 'undici:request:trailers', 'undici:request:error'] as const

/** The parts of undici's Request the channels hand over that are used here. */
interface UndiciRequest {
  readonly origin: string | URL
  readonly method: string
  readonly path: string
  /** undici 7 (the proxy's): [name, value, name, value…]; Node's own fetch (undici 6) writes text. */
  readonly headers: string[] | string
  addHeader: (name: string, value: string) => unknown
}

interface Call {
  readonly span: Span
  connection: Span | undefined
}

/** The gateway's request id among an undici request's headers; undefined for anything not the proxy's. */
function requestIdOf (headers: string[] | string): string | undefined {
  if (!Array.isArray(headers)) return undefined
  for (let i = 0; i < headers.length; i += 2) if (headers[i] === REQUEST_ID_HEADER) return headers[i + 1]
  return undefined
}

/**
 * A performance.now() instant as an HrTime, converted once: given as a number, the SDK converts it
 * per span with that span's own clock offset, and two spans given one instant would start apart.
 */
function hrTimeOf (performanceNow: number): HrTime {
  const ms = performance.timeOrigin + performanceNow
  const seconds = Math.floor(ms / 1000)
  return [seconds, Math.min(999_999_999, Math.round((ms - seconds * 1000) * 1e6))]
}

function pathOnly (path: string): string {
  const q = path.indexOf('?')
  return q < 0 ? path : path.slice(0, q)
}

export class UpstreamSpans {
  private readonly waiting = new Map<string, SampledTrace>()
  private readonly calls = new WeakMap<object, Call>()
  private readonly usedSockets = new WeakSet<object>()
  private readonly handlers: Record<(typeof CHANNELS)[number], (message: unknown) => void>

  private readonly tracer: Tracer
  private readonly maxWaiting: number

  constructor (tracer: Tracer, maxWaiting = DEFAULT_MAX_WAITING) {
    this.tracer = tracer
    this.maxWaiting = maxWaiting
    this.handlers = {
      'undici:request:create': (m) => { this.created((m as { request: UndiciRequest }).request) },
      'undici:client:sendHeaders': (m) => { this.sent(m as { request: object, socket: object }) },
      'undici:request:headers': (m) => { this.answered(m as { request: object, response: { statusCode: number } }) },
      'undici:request:trailers': (m) => { this.ended((m as { request: object }).request) },
      'undici:request:error': (m) => { this.failed(m as { request: object, error: Error & { code?: string } }) }
    }
    for (const name of CHANNELS) subscribe(name, this.handlers[name])
  }

  /** `trace` may call the backend from now until `forget` (a retry of the proxy is a call of its own). */
  expect (requestId: string, requestTrace: SampledTrace): void {
    if (this.waiting.size >= this.maxWaiting) {
      const oldest = this.waiting.keys().next()
      if (oldest.done !== true) this.waiting.delete(oldest.value)
    }
    this.waiting.set(requestId, requestTrace)
  }

  forget (requestId: string): void {
    this.waiting.delete(requestId)
  }

  /** Requests between `expect` and `forget` (tests check the table empties). */
  get size (): number {
    return this.waiting.size
  }

  close (): void {
    for (const name of CHANNELS) unsubscribe(name, this.handlers[name])
    this.waiting.clear()
  }

  private created (request: UndiciRequest): void {
    if (this.waiting.size === 0) return
    const id = requestIdOf(request.headers)
    const owner = id === undefined ? undefined : this.waiting.get(id)
    if (owner === undefined) return
    const origin = typeof request.origin === 'string' ? new URL(request.origin) : request.origin
    // The call began when the request started waiting for a connection at the proxy's gate.
    const startTime = owner.upstreamQueuedAt === undefined ? undefined : hrTimeOf(owner.upstreamQueuedAt)
    const span = this.tracer.startSpan(request.method, {
      kind: SpanKind.CLIENT,
      startTime,
      attributes: {
        [ATTR_HTTP_REQUEST_METHOD]: request.method,
        [ATTR_SERVER_ADDRESS]: origin.hostname,
        [ATTR_SERVER_PORT]: Number(origin.port === '' ? (origin.protocol === 'https:' ? 443 : 80) : origin.port),
        // No query string: its values are the client's, and a span keeps what it is given.
        [ATTR_URL_FULL]: `${origin.origin}${pathOnly(request.path)}`
      }
    }, owner.context)
    const connection = this.tracer.startSpan('upstream connection', { kind: SpanKind.INTERNAL, startTime }, trace.setSpan(owner.context, span))
    this.calls.set(request, { span, connection })
    const ids = span.spanContext()
    request.addHeader('traceparent', formatTraceparent(ids.traceId, ids.spanId, span.isRecording()))
    const state = ids.traceState?.serialize()
    if (state !== undefined && state !== '') request.addHeader('tracestate', state)
  }

  private sent ({ request, socket }: { request: object, socket: object }): void {
    const call = this.calls.get(request)
    if (call?.connection === undefined) return
    call.connection.setAttribute(ATTR_UPSTREAM_NEW_CONNECTION, !this.usedSockets.has(socket))
    this.usedSockets.add(socket)
    call.connection.end()
    call.connection = undefined
  }

  private answered ({ request, response }: { request: object, response: { statusCode: number } }): void {
    const call = this.calls.get(request)
    if (call === undefined) return
    call.span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, response.statusCode)
    if (response.statusCode >= 400) {
      call.span.setAttribute(ATTR_ERROR_TYPE, String(response.statusCode))
      call.span.setStatus({ code: SpanStatusCode.ERROR })
    }
  }

  private ended (request: object): void {
    const call = this.calls.get(request)
    if (call === undefined) return
    this.calls.delete(request)
    call.connection?.end()
    call.span.end()
  }

  private failed ({ request, error }: { request: object, error: Error & { code?: string } }): void {
    const call = this.calls.get(request)
    if (call === undefined) return
    const type = error.code ?? error.name
    call.span.setAttribute(ATTR_ERROR_TYPE, type)
    call.span.setStatus({ code: SpanStatusCode.ERROR, message: type })
    this.ended(request)
  }
}
