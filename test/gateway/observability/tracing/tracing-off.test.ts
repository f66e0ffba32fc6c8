// Tracing off (no OTLP endpoint, the default): no module of the OpenTelemetry SDK is loaded, by the
// gateway or the backend, and the only work is the client's `traceparent` — under the default
// TRACE_INCOMING_CONTEXT=continue it reaches the backend untouched and its trace id is in both
// services' log lines; under `restart` the gateway forwards no trace context at all. A resolve hook
// records every module this process loads, so it is registered before the gateway is imported. The
// API package (@opentelemetry/api) is not the SDK: prom-client loads it for its exemplars, as before.
import { registerHooks } from 'node:module'
import t from 'tap'

const loaded: string[] = []
registerHooks({
  resolve (specifier, context, next) {
    const result = next(specifier, context)
    if (/\/node_modules\/(@opentelemetry\/(?!api\/)|@fastify\/otel\/)/.test(result.url)) loaded.push(result.url)
    return result
  }
})

const { startBackend } = await import('../../../helpers/backend.js')
const { startEchoUpstream } = await import('../../../helpers/echo-upstream.js')
const { startGateway } = await import('../../../helpers/gateway.js')
const { bearer, DEMO_KEYS } = await import('../../../helpers/config-fixture.js')
const { scrape, sampleValue } = await import('../../../helpers/scrape.js')

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const TRACEPARENT = `00-${TRACE}-00f067aa0ba902b7-01`
const TRACESTATE = 'congo=t61rcWkgMzE'

t.test('continue (default): the client\'s traceparent and tracestate reach the backend as sent; both services log its trace id', async (t) => {
  const backend = await startBackend(t, { logs: true })
  const gw = await startGateway(t, { backendUrl: backend.url })
  const res = await fetch(`${gw.url}/v1/pets`, { headers: { ...bearer(DEMO_KEYS.pro), traceparent: TRACEPARENT, tracestate: TRACESTATE } })
  t.equal(res.status, 200)
  await res.arrayBuffer()
  const reqId = res.headers.get('x-request-id')
  const gatewayLine = gw.logs.find((l) => l.reqId === reqId && l.msg === 'request')
  const backendLine = backend.logs.find((l) => l.reqId === reqId && l.msg === 'request')
  t.equal(gatewayLine?.traceId, TRACE, 'gateway request line')
  t.equal(backendLine?.traceId, TRACE, 'backend request line: the same trace id, so the backend received the header')
  t.same(Object.keys(gatewayLine ?? {}).slice(0, Object.keys(gatewayLine ?? {}).indexOf('traceId') + 1).slice(-2), ['reqId', 'traceId'], 'next to the request id')

  const echo = await startEchoUpstream(t)
  const viaEcho = await startGateway(t, { backendUrl: echo.url })
  const forwarded = await fetch(`${viaEcho.url}/v1/pets`, { headers: { ...bearer(DEMO_KEYS.pro), traceparent: TRACEPARENT, tracestate: TRACESTATE } })
  await forwarded.arrayBuffer()
  t.equal(echo.received[0]?.headers.traceparent, TRACEPARENT, 'traceparent untouched')
  t.equal(echo.received[0]?.headers.tracestate, TRACESTATE, 'tracestate untouched')
})

t.test('continue: no traceparent, or an invalid one, gives no trace id to log', async (t) => {
  const gw = await startGateway(t)
  for (const headers of [{}, { traceparent: `00-${TRACE}-0000000000000000-01` }] as Array<Record<string, string>>) {
    const res = await fetch(`${gw.url}/v1/pets`, { headers: { ...bearer(DEMO_KEYS.pro), ...headers } })
    await res.arrayBuffer()
    const line = gw.logs.find((l) => l.reqId === res.headers.get('x-request-id') && l.msg === 'request')
    t.ok(line !== undefined && !('traceId' in line), JSON.stringify(headers))
  }
})

t.test('restart: an untrusted client\'s trace context never reaches the backend, nor the logs', async (t) => {
  const echo = await startEchoUpstream(t)
  const gw = await startGateway(t, { backendUrl: echo.url, tracing: { incoming: 'restart' } })
  const res = await fetch(`${gw.url}/v1/pets`, { headers: { ...bearer(DEMO_KEYS.pro), traceparent: TRACEPARENT, tracestate: TRACESTATE, trace_parent: TRACEPARENT } })
  t.equal(res.status, 200)
  await res.arrayBuffer()
  const headers = echo.received[0]?.headers ?? {}
  t.notOk('traceparent' in headers, 'no traceparent')
  t.notOk('tracestate' in headers, 'no tracestate')
  t.equal(headers['trace_parent'], TRACEPARENT, 'a header that merely looks alike is not the gateway\'s to drop')
  t.notOk(gw.logs.some((l) => 'traceId' in l), 'no trace id logged')
})

t.test('the span counters are exposed at 0 with tracing off', async (t) => {
  const gw = await startGateway(t)
  const { samples } = await scrape(gw.adminUrl)
  t.equal(sampleValue(samples, 'gateway_trace_spans_exported_total'), 0)
  t.equal(sampleValue(samples, 'gateway_trace_spans_dropped_total', { reason: 'queue_full' }), 0)
  t.equal(sampleValue(samples, 'gateway_trace_spans_dropped_total', { reason: 'export_failed' }), 0)
})

t.test('no module of the OpenTelemetry SDK (nor @fastify/otel) was loaded by any of the above', async (t) => {
  t.same(loaded, [])
})
