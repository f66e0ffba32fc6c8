// The spans of one gateway request, made by hooks the tracing plugin registers when tracing is on: the
// server span (first onRequest hook to the response), the limiter decision (hooks on either side of
// the limiter's own, see limiter-spans.ts) and, through UpstreamSpans, the call to the backend.
// Contexts are passed explicitly — no context manager, so no AsyncLocalStorage on the hot path. The
// sampling decision comes first, at the edge (edge-decision.ts): a trace the sampler leaves out gets
// no span at all, not even a non-recording one; its ids still reach the log lines and the backend
// (the forwarder adds its `traceparent`). Loaded only with tracing on.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { defaultTextMapGetter, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context, type Link, type Tracer } from '@opentelemetry/api'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import {
  ATTR_CLIENT_ADDRESS, ATTR_ERROR_TYPE, ATTR_HTTP_REQUEST_METHOD, ATTR_HTTP_REQUEST_METHOD_ORIGINAL, ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE, ATTR_URL_PATH, ATTR_URL_SCHEME
} from '@opentelemetry/semantic-conventions'
import { toApiError } from '../../../interface/errors.js'
import { ANONYMOUS_PLAN, UNMATCHED_ROUTE } from '../../../shared/labels.js'
import type { EdgeSampler } from '../../../shared/tracing/edge-sampler.js'
import type { TraceIds } from '../../../shared/tracing/trace-ids.js'
import { bindRequestLog } from '../request-log.js'
import { routeUrlOf } from '../route-url.js'
import {
  ATTR_CONSUMER_ID, ATTR_PLAN, ATTR_RATELIMIT_BAN_STARTED, ATTR_RATELIMIT_OUTCOME, ATTR_RATELIMIT_REMAINING, ATTR_RATELIMIT_RETRY_AFTER,
  ATTR_RATELIMIT_SOURCE, ATTR_RATELIMIT_STORE, ATTR_RATELIMIT_WINDOW, ATTR_REQUEST_ID
} from './attributes.js'
import { createEdgeDecision, type SampledStart } from './edge-decision.js'
import type { TraceIncoming } from './plugin.js'
import type { SampledTrace } from './request-trace.js'
import { UpstreamSpans } from './upstream-spans.js'

/** HTTP semantic conventions: a method outside this set is `_OTHER`, the original kept beside it. */
const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE', 'PATCH', 'QUERY'])
const OTHER_METHOD = '_OTHER'
const propagator = new W3CTraceContextPropagator()

type Done = HookHandlerDoneFunction

export interface RequestSpanHooks {
  readonly startServerSpan: (request: FastifyRequest, reply: FastifyReply, done: Done) => void
  readonly startLimiterSpan: (request: FastifyRequest, reply: FastifyReply, done: Done) => void
  readonly endLimiterSpan: (request: FastifyRequest, reply: FastifyReply, done: Done) => void
  readonly recordError: (request: FastifyRequest, reply: FastifyReply, error: FastifyError, done: Done) => void
  readonly endServerSpan: (request: FastifyRequest, reply: FastifyReply, done: Done) => void
  readonly upstream: UpstreamSpans
}

function pathOf (url: string): string {
  const q = url.indexOf('?')
  return q < 0 ? url : url.slice(0, q)
}

/** How the gateway samples: the sampler of the settings, and the ids it decides on (also the SDK's IdGenerator). */
export interface EdgeSampling {
  readonly sampler: EdgeSampler
  readonly ids: TraceIds
}

export function createRequestSpans (app: FastifyInstance, tracer: Tracer, incoming: TraceIncoming, sampling: EdgeSampling): RequestSpanHooks {
  const upstream = new UpstreamSpans(tracer)
  const decide = createEdgeDecision(sampling.sampler, sampling.ids, incoming)

  /** The server span's parent and links: the client's context (continued), a link to it (restart), or a new trace with the decided id. */
  function origin (request: FastifyRequest, start: SampledStart): { parent: Context, links: Link[] | undefined } {
    if (start.client === undefined) {
      sampling.ids.useForNextRoot(start.traceId)
      return { parent: ROOT_CONTEXT, links: undefined }
    }
    // The SDK's own propagator, for the remote span context and its tracestate (the decision read the same header).
    const extracted = propagator.extract(ROOT_CONTEXT, request.headers, defaultTextMapGetter)
    if (start.continued) return { parent: extracted, links: undefined }
    sampling.ids.useForNextRoot(start.traceId)
    const remote = trace.getSpanContext(extracted)
    return { parent: ROOT_CONTEXT, links: remote === undefined ? undefined : [{ context: remote }] }
  }

  function finishLimiterSpan (request: FastifyRequest, t: SampledTrace): void {
    const span = t.limiter
    if (span === undefined) return
    t.limiter = undefined
    const decision = request.rateLimit
    const consumer = request.consumer
    if (consumer !== null) span.setAttribute(ATTR_CONSUMER_ID, consumer.consumerId)
    span.setAttribute(ATTR_PLAN, decision?.policy ?? consumer?.plan ?? ANONYMOUS_PLAN)
    if (app.hasDecorator('limiter')) span.setAttribute(ATTR_RATELIMIT_STORE, app.limiter.store.describe().kind)
    if (decision === null) {
      // No decision: the store failed under STORE_ON_ERROR=closed and the limiter answered 503.
      span.setAttribute(ATTR_RATELIMIT_OUTCOME, 'unavailable')
      span.setStatus({ code: SpanStatusCode.ERROR, message: 'limiter store unavailable' })
    } else {
      span.setAttribute(ATTR_RATELIMIT_OUTCOME, decision.outcome)
      span.setAttribute(ATTR_RATELIMIT_SOURCE, decision.source)
      span.setAttribute(ATTR_RATELIMIT_WINDOW, decision.rejectedBy ?? decision.window)
      span.setAttribute(ATTR_RATELIMIT_REMAINING, decision.remaining)
      if (!decision.allowed && decision.retryAfter !== undefined) span.setAttribute(ATTR_RATELIMIT_RETRY_AFTER, decision.retryAfter)
      if (decision.banStarted) span.setAttribute(ATTR_RATELIMIT_BAN_STARTED, true)
    }
    span.end()
  }

  return {
    upstream,

    startServerSpan (request, _reply, done) {
      const start = decide(request.headers)
      if (!start.sampled) {
        request.trace = start
        bindRequestLog(request, { traceId: start.traceId })
        done()
        return
      }
      const { parent, links } = origin(request, start)
      const span = tracer.startSpan(request.method, { kind: SpanKind.SERVER, links }, parent)
      const method = request.method
      const known = KNOWN_METHODS.has(method)
      span.setAttributes({
        [ATTR_HTTP_REQUEST_METHOD]: known ? method : OTHER_METHOD,
        [ATTR_URL_PATH]: pathOf(request.url),
        [ATTR_URL_SCHEME]: request.protocol,
        [ATTR_CLIENT_ADDRESS]: request.ip,
        [ATTR_REQUEST_ID]: request.id
      })
      if (!known) span.setAttribute(ATTR_HTTP_REQUEST_METHOD_ORIGINAL, method)
      const t: SampledTrace = { sampled: true, span, context: trace.setSpan(parent, span), limiter: undefined, errorType: undefined }
      request.trace = t
      upstream.expect(request.id, t)
      bindRequestLog(request, { traceId: span.spanContext().traceId })
      done()
    },

    startLimiterSpan (request, _reply, done) {
      const t = request.trace
      if (t?.sampled === true) t.limiter = tracer.startSpan('rate limit', { kind: SpanKind.INTERNAL }, t.context)
      done()
    },

    endLimiterSpan (request, _reply, done) {
      const t = request.trace
      if (t?.sampled === true) finishLimiterSpan(request, t)
      done()
    },

    // Runs for every error answered, hooks' included: a 429 or a 503 thrown by the limiter ends its
    // span here (its after-hook never runs).
    recordError (request, _reply, error, done) {
      const t = request.trace
      if (t?.sampled === true) {
        finishLimiterSpan(request, t)
        const answered = toApiError(error)
        if (answered.status >= 500) t.errorType = answered.code
      }
      done()
    },

    endServerSpan (request, reply, done) {
      const t = request.trace
      request.trace = null
      if (t?.sampled !== true) { done(); return }
      upstream.forget(request.id)
      finishLimiterSpan(request, t)
      const span = t.span
      const status = reply.statusCode
      const route = routeUrlOf(request)
      span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status)
      if (route !== UNMATCHED_ROUTE) {
        span.setAttribute(ATTR_HTTP_ROUTE, route)
        span.updateName(`${request.method} ${route}`)
      }
      const consumer = request.consumer
      if (consumer !== null) span.setAttribute(ATTR_CONSUMER_ID, consumer.consumerId)
      span.setAttribute(ATTR_PLAN, consumer?.plan ?? ANONYMOUS_PLAN)
      if (status >= 500) {
        span.setAttribute(ATTR_ERROR_TYPE, t.errorType ?? String(status))
        span.setStatus({ code: SpanStatusCode.ERROR })
      }
      span.end()
      done()
    }
  }
}
