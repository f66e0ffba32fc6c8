// The edge sampler decides as the SDK's samplers would, for every OTEL_TRACES_SAMPLER and ratio, on
// random trace ids with and without a remote parent (sampled or not) — so deciding at the edge, before
// the SDK is asked for anything, changes no trace's fate. And the ids made before the decision are
// the SDK's kind: 32 and 16 lowercase hex digits, never all zero, the decided id handed to the SDK once.
import t from 'tap'
import fc from 'fast-check'
import { ROOT_CONTEXT, SamplingDecision, SpanKind, trace } from '@opentelemetry/api'
import {
  AlwaysOffSampler, AlwaysOnSampler, ParentBasedSampler, TraceIdRatioBasedSampler, type Sampler
} from '@opentelemetry/sdk-trace'
import { createEdgeSampler, ratioUpperBound, traceIdValue } from '../../../src/shared/tracing/edge-sampler.js'
import { TRACES_SAMPLERS, type TracesSampler } from '../../../src/shared/tracing/settings.js'
import { TraceIds } from '../../../src/shared/tracing/trace-ids.js'

/** The SDK's sampler for a setting, as src/shared/tracing/sdk.ts builds it. */
function sdkSampler (name: TracesSampler, ratio: number): Sampler {
  const r = new TraceIdRatioBasedSampler(ratio)
  switch (name) {
    case 'always_on': return new AlwaysOnSampler()
    case 'always_off': return new AlwaysOffSampler()
    case 'traceidratio': return r
    case 'parentbased_always_off': return new ParentBasedSampler({ root: new AlwaysOffSampler() })
    case 'parentbased_traceidratio': return new ParentBasedSampler({ root: r })
    case 'parentbased_always_on': return new ParentBasedSampler({ root: new AlwaysOnSampler() })
  }
}

const hex = (n: number): fc.Arbitrary<string> => fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: n, maxLength: n })
  .filter((s) => /[1-9a-f]/.test(s))

t.test('decides as the SDK\'s sampler for every setting, ratio, trace id and parent', async (t) => {
  const parent = fc.option(fc.record({ spanId: hex(16), sampled: fc.boolean() }), { nil: undefined })
  const ratio = fc.oneof(fc.constantFrom(0, 1, 0.01, 0.5, 0.999), fc.double({ min: 0, max: 1, noNaN: true }))
  fc.assert(fc.property(fc.constantFrom(...TRACES_SAMPLERS), ratio, hex(32), parent, (name, r, traceId, p) => {
    const context = p === undefined
      ? ROOT_CONTEXT
      : trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId: p.spanId, traceFlags: p.sampled ? 1 : 0, isRemote: true })
    const sdk = sdkSampler(name, r).shouldSample(context, traceId, 'GET', SpanKind.SERVER, {}, []).decision === SamplingDecision.RECORD_AND_SAMPLED
    const edge = createEdgeSampler({ sampler: name, samplerRatio: r })(traceId, p === undefined ? undefined : { traceId, spanId: p.spanId, sampled: p.sampled })
    return sdk === edge
  }), { numRuns: 5_000, seed: 33 })
  t.pass('5,000 decisions alike')
})

t.test('the ratio reads the trace id as the SDK does', async (t) => {
  t.equal(traceIdValue('00000001000000020000000400000008'), 15, 'four words XORed')
  t.equal(traceIdValue('ffffffff00000000ffffffff00000000'), 0)
  t.equal(traceIdValue('abcdef0100000000000000000000000a'), (0xabcdef01 ^ 0xa) >>> 0, 'unsigned')
  t.equal(ratioUpperBound(1), 2 ** 32, 'ratio 1 samples every id')
  t.equal(ratioUpperBound(0), 0, 'ratio 0 none')
  t.equal(ratioUpperBound(0.5), Math.floor(0.5 * 0xffffffff))
})

t.test('ids are lowercase hex of the W3C lengths, distinct, and the decided one reaches the SDK once', async (t) => {
  const ids = new TraceIds()
  const traces = Array.from({ length: 1_000 }, () => ids.traceId())
  t.same(traces.filter((id) => !/^[0-9a-f]{32}$/.test(id) || /^0+$/.test(id)), [], 'every trace id valid')
  t.equal(new Set(traces).size, 1_000, 'no repeats in 1,000')
  t.match(ids.spanId(), /^[0-9a-f]{16}$/)
  const decided = 'a'.repeat(32)
  ids.useForNextRoot(decided)
  t.equal(ids.generateTraceId(), decided, 'the SDK\'s next root span takes the decided id')
  t.not(ids.generateTraceId(), decided, 'once')
  t.match(ids.generateSpanId(), /^[0-9a-f]{16}$/)
})
