// Tracing in the gateway's request pipeline (docs/tracing.md). Registered before every other plugin,
// so its onRequest hook runs first and every log line of a request carries its trace id.
//   Off (no OTLP endpoint, the default): no module of the OpenTelemetry SDK is loaded and the only
//   per-request work is the client's `traceparent`. Under TRACE_INCOMING_CONTEXT=continue its trace id
//   goes into the request's log lines and the header reaches the backend as the client sent it (so the
//   backend logs the same id); under `restart` neither happens: the gateway forwards no trace context.
//   On: the SDK and the span hooks (request-spans.ts, upstream-spans.ts) are imported here, once; the
//   gateway then owns the backend's trace context (its own `traceparent`, never the client's). It
//   decides sampling itself, at the edge (edge-decision.ts), and asks the SDK only for sampled traces.
// The limiter's span needs hooks on either side of the limiter's: limiter-spans.ts.
import fp from 'fastify-plugin'
import type { FastifyRequest, FastifyReply, HookHandlerDoneFunction } from 'fastify'
import type { TracingSettings } from '../../../shared/tracing/settings.js'
import { traceIdOf } from '../../../shared/tracing/traceparent.js'
import { bindRequestLog } from '../request-log.js'
import type { RequestSpanHooks } from './request-spans.js'
import type { GatewayTracing } from './request-trace.js'

/** TRACE_INCOMING_CONTEXT: `continue` a client's W3C trace context, or `restart` the trace at the edge (docs/tracing.md). */
export const TRACE_INCOMING_POLICIES = ['continue', 'restart'] as const
export type TraceIncoming = (typeof TRACE_INCOMING_POLICIES)[number]
export const DEFAULT_TRACE_INCOMING: TraceIncoming = 'continue'
/** OTEL_SERVICE_NAME when unset. */
export const DEFAULT_GATEWAY_SERVICE_NAME = 'petstore-gateway'

export interface TracingOptions {
  /** Export settings (shared/tracing/settings.ts); absent or without an endpoint: tracing off. */
  settings?: TracingSettings | undefined
  /** TRACE_INCOMING_CONTEXT: continue a client's trace (default), or start a new one at the edge (linked to the client's). */
  incoming?: TraceIncoming | undefined
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The span hooks with tracing on, for limiter-spans.ts; undefined with tracing off. */
    tracingHooks: RequestSpanHooks | undefined
  }
}

/** Tracing off, TRACE_INCOMING_CONTEXT=continue: the client's trace id in the request's log lines. */
export function logClientTraceId (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
  const traceId = traceIdOf(request.headers.traceparent)
  if (traceId !== undefined) bindRequestLog(request, { traceId })
  done()
}

export const tracingPlugin = fp<TracingOptions>(async function tracingPlugin (app, opts) {
  const incoming = opts.incoming ?? DEFAULT_TRACE_INCOMING
  const settings = opts.settings
  app.decorateRequest('trace', null)
  if (settings?.tracesUrl === undefined) {
    app.decorateRequest('ownsTraceContext', incoming === 'restart')
    const off: GatewayTracing = { enabled: false, counts: undefined }
    app.decorate('tracing', off)
    app.decorate('tracingHooks', undefined)
    if (incoming === 'continue') app.addHook('onRequest', logClientTraceId)
    return
  }
  const [{ startTracing }, { createRequestSpans }, { createEdgeSampler }, { TraceIds }] = await Promise.all([
    import('../../../shared/tracing/sdk.js'),
    import('./request-spans.js'),
    import('../../../shared/tracing/edge-sampler.js'),
    import('../../../shared/tracing/trace-ids.js')
  ])
  const ids = new TraceIds()
  const tracing = await startTracing(settings, app.log, { sampledBefore: ids })
  const hooks = createRequestSpans(app, tracing.tracer, incoming, { sampler: createEdgeSampler(settings), ids })
  app.decorateRequest('ownsTraceContext', true)
  const on: GatewayTracing = { enabled: true, counts: tracing.counts }
  app.decorate('tracing', on)
  app.decorate('tracingHooks', hooks)
  app.addHook('onRequest', hooks.startServerSpan)
  app.addHook('onError', hooks.recordError)
  app.addHook('onResponse', hooks.endServerSpan)
  app.addHook('onClose', async () => {
    hooks.upstream.close()
    await tracing.shutdown()
  })
}, { name: 'gateway-tracing' })
