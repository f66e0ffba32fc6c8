// Where a request's trace begins, decided in the gateway's first hook before any span or context
// exists: which trace the request belongs to (the client's, under TRACE_INCOMING_CONTEXT=continue and
// a valid `traceparent`, or a new one), and whether the sampler records it. A trace left out ends
// here as its ids (the log lines' trace id, the backend's `traceparent` with `sampled` off): no SDK
// span, context or id generator runs for it, so an unsampled request costs next to nothing over
// tracing off (docs/tracing.md, Cost). Only a sampled trace goes on to the SDK (request-spans.ts).
import type { IncomingHttpHeaders } from 'node:http'
import { TraceState } from '@opentelemetry/core'
import type { EdgeSampler } from '../../../shared/tracing/edge-sampler.js'
import type { TraceIds } from '../../../shared/tracing/trace-ids.js'
import { formatTraceparent, parseTraceparent, type TraceParent } from '../../../shared/tracing/traceparent.js'
import type { TraceIncoming } from './plugin.js'
import type { UnsampledTrace } from './request-trace.js'

/** A trace the sampler records: what the SDK needs to start its server span. */
export interface SampledStart {
  readonly sampled: true
  readonly traceId: string
  /** The client's valid `traceparent`, whatever the policy (under `restart` it becomes a link). */
  readonly client: TraceParent | undefined
  /** True when the trace is the client's (continued); false: a new trace starting here with `traceId`. */
  readonly continued: boolean
}

export type EdgeDecision = SampledStart | UnsampledTrace

/** `tracestate` as the SDK's W3C propagator carries it on (entries checked, at most 32), or undefined. */
function tracestateOf (header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined
  const state = new TraceState(Array.isArray(header) ? header.join(',') : header).serialize()
  return state === '' ? undefined : state
}

export function createEdgeDecision (sampler: EdgeSampler, ids: TraceIds, incoming: TraceIncoming): (headers: IncomingHttpHeaders) => EdgeDecision {
  return function decide (headers) {
    const header = headers.traceparent
    const client = header === undefined ? undefined : parseTraceparent(header)
    const parent = incoming === 'continue' ? client : undefined
    const traceId = parent === undefined ? ids.traceId() : parent.traceId
    if (sampler(traceId, parent)) return { sampled: true, traceId, client, continued: parent !== undefined }
    return {
      sampled: false,
      traceId,
      traceparent: formatTraceparent(traceId, ids.spanId(), false),
      tracestate: parent === undefined ? undefined : tracestateOf(headers.tracestate)
    }
  }
}
