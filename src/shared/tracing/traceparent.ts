// The W3C Trace Context `traceparent` header (https://www.w3.org/TR/trace-context/), read and written
// without the OpenTelemetry SDK: with tracing off the gateway still carries a client's trace (and both
// services log its id), and that must not load the SDK. Validity is the SDK propagator's, so a trace
// id logged here is the one the SDK would continue: version `ff` and all-zero ids are invalid, version
// `00` has exactly four fields, a later version may carry more after a `-`.

const TRACEPARENT = /^(?!ff)[0-9a-f]{2}-(?![0]{32})([0-9a-f]{32})-(?![0]{16})([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/
const VERSION_00_LENGTH = 55

export interface TraceParent {
  readonly traceId: string
  readonly spanId: string
  /** The `sampled` flag (bit 0 of trace-flags). */
  readonly sampled: boolean
}

/** The header as Node gives it: a client's repeated header arrives joined (`a, b`), which is invalid. */
export type HeaderValue = string | string[] | undefined

function match (header: HeaderValue): RegExpExecArray | null {
  if (typeof header !== 'string' || header.length < VERSION_00_LENGTH) return null
  const m = TRACEPARENT.exec(header)
  if (m === null || (header.startsWith('00') && header.length !== VERSION_00_LENGTH)) return null
  return m
}

export function parseTraceparent (header: HeaderValue): TraceParent | undefined {
  const m = match(header)
  if (m === null) return undefined
  return { traceId: m[1] as string, spanId: m[2] as string, sampled: (Number.parseInt(m[3] as string, 16) & 1) === 1 }
}

/** Only the trace id (what a log line carries), or undefined when the header is absent or invalid. */
export function traceIdOf (header: HeaderValue): string | undefined {
  return match(header)?.[1]
}

/** A version-00 header for a span of this process. */
export function formatTraceparent (traceId: string, spanId: string, sampled: boolean): string {
  return `00-${traceId}-${spanId}-${sampled ? '01' : '00'}`
}
