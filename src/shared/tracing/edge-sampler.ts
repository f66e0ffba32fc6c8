// The sampling decision as the OpenTelemetry SDK's samplers make it (OTEL_TRACES_SAMPLER and its
// argument, docs/tracing.md), but from a trace id and the client's parsed `traceparent` alone: no
// span, no context, no SDK module. The gateway decides here, at the edge, before anything of a trace
// exists, so that a request the sampler leaves out costs no SDK work at all; the SDK is then asked only
// for the spans of sampled traces. test/shared/tracing/edge-sampler.test.ts holds it to the SDK's
// samplers on random ids and parents.
import type { TracingSettings } from './settings.js'
import type { TraceParent } from './traceparent.js'

/** True when the trace is recorded. `parent`: the remote parent the trace continues, if any. */
export type EdgeSampler = (traceId: string, parent: TraceParent | undefined) => boolean

/** The SDK's TraceIdRatioBasedSampler bound: a trace is sampled when its id's accumulated value is below it. */
export function ratioUpperBound (ratio: number): number {
  const r = Number.isNaN(ratio) ? 0 : Math.min(1, Math.max(0, ratio))
  return r === 1 ? 0x100000000 : Math.floor(r * 0xffffffff)
}

/** The four 32-bit words of a 32-hex-digit trace id XORed together, as the SDK's ratio sampler reads it. */
export function traceIdValue (traceId: string): number {
  let accumulation = 0
  for (let i = 0; i < 32; i += 8) {
    let word = 0
    for (let j = 0; j < 8; j++) {
      const c = traceId.charCodeAt(i + j)
      word = (word << 4) | (c < 58 ? c - 48 : c < 71 ? c - 55 : c - 87)
    }
    accumulation = (accumulation ^ word) >>> 0
  }
  return accumulation
}

function rootSampler (settings: Pick<TracingSettings, 'sampler' | 'samplerRatio'>): (traceId: string) => boolean {
  switch (settings.sampler) {
    case 'always_on':
    case 'parentbased_always_on':
      return () => true
    case 'always_off':
    case 'parentbased_always_off':
      return () => false
    case 'traceidratio':
    case 'parentbased_traceidratio': {
      const bound = ratioUpperBound(settings.samplerRatio)
      return (traceId) => traceIdValue(traceId) < bound
    }
  }
}

export function createEdgeSampler (settings: Pick<TracingSettings, 'sampler' | 'samplerRatio'>): EdgeSampler {
  const root = rootSampler(settings)
  // A parent-based sampler follows a remote parent's sampled flag and asks its root sampler only
  // for a trace that starts here; the others decide on the trace id alone.
  if (settings.sampler.startsWith('parentbased_')) return (traceId, parent) => parent === undefined ? root(traceId) : parent.sampled
  return (traceId) => root(traceId)
}
