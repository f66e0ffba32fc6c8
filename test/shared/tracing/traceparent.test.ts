import t from 'tap'
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
