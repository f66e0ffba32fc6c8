// Tracing on: what `traceparent` the backend receives (exactly one, the gateway's) and how the trust
// setting and the sampler decide the trace, seen from a test upstream that records the headers it got
// and from the spans exported.
import t from 'tap'
import { startEchoUpstream } from '../../../helpers/echo-upstream.js'
import { startGateway } from '../../../helpers/gateway.js'
import { bearer, DEMO_KEYS } from '../../../helpers/config-fixture.js'
import { startOtlpReceiver } from '../../../helpers/otlp-receiver.js'
import { theSpan, traceSpans, tracingTo } from '../../../helpers/tracing.js'
import { parseTraceparent } from '../../../../src/shared/tracing/traceparent.js'

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const SPAN = '00f067aa0ba902b7'
const GATEWAY = 'petstore-gateway'

async function get (url: string, headers: Record<string, string> = {}): Promise<Response> {
  const res = await fetch(`${url}/v1/pets`, { headers: { ...bearer(DEMO_KEYS.pro), ...headers } })
  await res.arrayBuffer()
  return res
}

t.test('continue: the backend gets one traceparent, the gateway\'s upstream span as parent, and the client\'s tracestate', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const echo = await startEchoUpstream(t)
  const gw = await startGateway(t, { backendUrl: echo.url, tracing: { settings: tracingTo(receiver.url, GATEWAY) } })
  await get(gw.url, { traceparent: `00-${TRACE}-${SPAN}-01`, tracestate: 'congo=t61rcWkgMzE' })
  const headers = echo.received[0]?.headers ?? {}
  const received = parseTraceparent(headers.traceparent)
  t.ok(received !== undefined, `one valid traceparent (got ${String(headers.traceparent)})`)
  t.equal(received?.traceId, TRACE, 'the client\'s trace')
  t.equal(received?.sampled, true)
  t.equal(headers.tracestate, 'congo=t61rcWkgMzE')
  const spans = await traceSpans(receiver, TRACE, 4)
  t.equal(received?.spanId, theSpan(spans, TRACE, GATEWAY, 'GET').spanId, 'its parent is the gateway\'s upstream span, not the client\'s span')
})

t.test('restart: a new trace at the edge, linked to the client\'s; the backend never sees the client\'s ids', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const echo = await startEchoUpstream(t)
  const gw = await startGateway(t, { backendUrl: echo.url, tracing: { settings: tracingTo(receiver.url, GATEWAY), incoming: 'restart' } })
  const res = await get(gw.url, { traceparent: `00-${TRACE}-${SPAN}-01`, tracestate: 'congo=t61rcWkgMzE' })
  const headers = echo.received[0]?.headers ?? {}
  const received = parseTraceparent(headers.traceparent)
  t.ok(received !== undefined && received.traceId !== TRACE, 'the backend gets a traceparent of a new trace')
  t.notOk('tracestate' in headers, 'and not the client\'s tracestate')
  const spans = await traceSpans(receiver, received?.traceId ?? '', 4)
  const server = theSpan(spans, received?.traceId ?? '', GATEWAY, 'GET /v1/pets')
  t.equal(server.parentSpanId, '', 'a root span')
  t.same(server.links.map((l) => [l.traceId, l.spanId]), [[TRACE, SPAN]], 'linked to the client\'s span')
  const line = gw.logs.find((l) => l.reqId === res.headers.get('x-request-id') && l.msg === 'request')
  t.equal(line?.traceId, received?.traceId, 'the log line carries the new trace id')
})

t.test('parent-based ratio sampling: an unsampled trace still carries its ids; a sampled parent is followed', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const echo = await startEchoUpstream(t)
  const gw = await startGateway(t, {
    backendUrl: echo.url,
    tracing: { settings: tracingTo(receiver.url, GATEWAY, { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' }) }
  })
  const unsampled = await get(gw.url)
  const headers = echo.received[0]?.headers ?? {}
  const received = parseTraceparent(headers.traceparent)
  t.equal(received?.sampled, false, 'ratio 0 and no parent: not sampled, flag 00 sent on')
  const line = gw.logs.find((l) => l.reqId === unsampled.headers.get('x-request-id') && l.msg === 'request')
  t.equal(line?.traceId, received?.traceId, 'the unsampled trace id is still logged, and is the one the backend got')

  await get(gw.url, { traceparent: `00-${TRACE}-${SPAN}-01` })
  t.equal(parseTraceparent(echo.received[1]?.headers.traceparent)?.sampled, true, 'a sampled parent is followed whatever the ratio')
  // Spans leave in the order they ended: once the later trace is in, the earlier one would be too.
  await traceSpans(receiver, TRACE, 4)
  t.notOk(receiver.spans.some((s) => s.traceId === received?.traceId), 'nothing of the unsampled trace was exported')
})
