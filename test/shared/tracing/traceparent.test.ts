import t from 'tap'
import fc from 'fast-check'
import { parseTraceParent } from '@opentelemetry/core'
import { formatTraceparent, parseTraceparent, traceIdOf } from '../../../src/shared/tracing/traceparent.js'

const TRACE = '0af7651916cd43dd8448eb211c80319c'
const SPAN = 'b7ad6b7169203331'

t.test('a valid traceparent gives its ids and sampled flag', async (t) => {
  t.same(parseTraceparent(`00-${TRACE}-${SPAN}-01`), { traceId: TRACE, spanId: SPAN, sampled: true })
  t.same(parseTraceparent(`00-${TRACE}-${SPAN}-00`), { traceId: TRACE, spanId: SPAN, sampled: false })
  t.same(parseTraceparent(`00-${TRACE}-${SPAN}-03`)?.sampled, true, 'other flag bits do not hide the sampled bit')
  t.equal(traceIdOf(`00-${TRACE}-${SPAN}-01`), TRACE)
  t.equal(traceIdOf(`cc-${TRACE}-${SPAN}-01-what-the-future-holds`), TRACE, 'a later version may carry more fields')
})

t.test('what the W3C specification (and the SDK propagator) refuses is not a trace', async (t) => {
  const invalid = [
    undefined,
    '',
    `ff-${TRACE}-${SPAN}-01`, // version ff
    `00-${'0'.repeat(32)}-${SPAN}-01`, // all-zero trace id
    `00-${TRACE}-${'0'.repeat(16)}-01`, // all-zero span id
    `00-${TRACE.toUpperCase()}-${SPAN}-01`, // upper-case hex
    `00-${TRACE}-${SPAN}-01-extra`, // version 00 has exactly four fields
    `00-${TRACE.slice(1)}-${SPAN}-01`, // short trace id
    `00-${TRACE}-${SPAN}-01, 00-${TRACE}-${SPAN}-01`, // a repeated header as Node joins it
    `00-${TRACE}-${SPAN}-0x`
  ]
  for (const header of invalid) {
    t.equal(parseTraceparent(header), undefined, String(header))
    t.equal(traceIdOf(header), undefined, String(header))
  }
  t.equal(traceIdOf([`00-${TRACE}-${SPAN}-01`]), undefined, 'an array (not what Node gives for traceparent) is refused')
})

t.test('formatTraceparent writes version 00 with the sampled flag', async (t) => {
  t.equal(formatTraceparent(TRACE, SPAN, true), `00-${TRACE}-${SPAN}-01`)
  t.equal(formatTraceparent(TRACE, SPAN, false), `00-${TRACE}-${SPAN}-00`)
  t.same(parseTraceparent(formatTraceparent(TRACE, SPAN, true)), { traceId: TRACE, spanId: SPAN, sampled: true }, 'round trip')
})

t.test('agrees with the SDK propagator\'s parser on every combination of valid and broken fields', async (t) => {
  const hex = (n: number): fc.Arbitrary<string> => fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: n, maxLength: n })
  const header = fc.tuple(
    fc.oneof(fc.constantFrom('00', '01', 'cc', 'ff', '0g', '0'), hex(2)),
    fc.oneof(hex(32), fc.constant('0'.repeat(32)), hex(32).map((s) => s.toUpperCase()), hex(31)),
    fc.oneof(hex(16), fc.constant('0'.repeat(16)), hex(15)),
    fc.oneof(hex(2), fc.constantFrom('0x', '1')),
    fc.constantFrom('', '-', '-x', 'x', '-00-more')
  ).map(([v, trace, span, flags, rest]) => `${v}-${trace}-${span}-${flags}${rest}`)
  fc.assert(fc.property(header, (h) => {
    const sdk = parseTraceParent(h)
    const ours = parseTraceparent(h)
    if (sdk === null) return ours === undefined
    return ours !== undefined && ours.traceId === sdk.traceId && ours.spanId === sdk.spanId && ours.sampled === ((sdk.traceFlags & 1) === 1) && traceIdOf(h) === sdk.traceId
  }), { numRuns: 2_000, seed: 27 })
  t.pass('2,000 headers parsed alike')
})
