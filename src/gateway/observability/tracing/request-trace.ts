// What a traced request carries between the tracing hooks, and the decorators the tracing plugin
// adds. Types only (erased at run time): with tracing off nothing here loads the SDK.
import type { Context, Span } from '@opentelemetry/api'
import type { SpanCounts } from '../../../shared/tracing/span-counts.js'

/** A trace the sampler records: its spans, made by the SDK. */
export interface SampledTrace {
  readonly sampled: true
  /** The server span. */
  readonly span: Span
  /** The server span's context, parent of the request's other spans. */
  readonly context: Context
  /** The limiter decision's span while it runs. */
  limiter: Span | undefined
  /** The catalogue code of a 5xx the gateway answered itself (`error.type` of the server span). */
  errorType: string | undefined
  /**
   * performance.now() when the request began to wait for a backend connection (the proxy's upstream
   * gate), set before its upstream call is made: the upstream call and its connection wait start there.
   */
  upstreamQueuedAt?: number
}

/**
 * A trace the sampler left out, decided at the edge before any span or context exists: only its ids,
 * for the log lines and the backend (which then records nothing either). No SDK object at all.
 */
export interface UnsampledTrace {
  readonly sampled: false
  readonly traceId: string
  /** What the backend receives: this trace, a span id of the gateway's, `sampled` off. */
  readonly traceparent: string
  /** The continued parent's `tracestate`, as the SDK's propagator would carry it; undefined when none. */
  readonly tracestate: string | undefined
}

export type RequestTrace = SampledTrace | UnsampledTrace

export interface GatewayTracing {
  /** True when spans are exported (an OTLP endpoint is set). */
  readonly enabled: boolean
  /** Exported and dropped spans since start; undefined with tracing off. */
  readonly counts: SpanCounts | undefined
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the tracing plugin's first onRequest hook with tracing on; null otherwise. */
    trace: RequestTrace | null
    /**
     * True when the gateway decides the backend's `traceparent`/`tracestate` (tracing on, or
     * TRACE_INCOMING_CONTEXT=restart): a client's own are then not forwarded.
     */
    ownsTraceContext: boolean
  }
  interface FastifyInstance {
    tracing: GatewayTracing
  }
}
