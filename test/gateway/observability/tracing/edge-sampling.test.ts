// The sampling decision at the edge (docs/tracing.md, Cost): a trace the sampler leaves out costs no
// SDK span, context or id — only its ids reach the log line and the backend — while a sampled one gets
// every span, under the trace id the decision was made on. Seen from a counting tracer around the real
// SDK's, and end to end from a test upstream and an OTLP receiver.
import t from 'tap'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import Fastify from 'fastify'
import type { Span, SpanOptions, Context, Tracer } from '@opentelemetry/api'
import { startEchoUpstream } from '../../../helpers/echo-upstream.js'
import { startGateway } from '../../../helpers/gateway.js'
import { bearer, DEMO_KEYS } from '../../../helpers/config-fixture.js'
import { startOtlpReceiver } from '../../../helpers/otlp-receiver.js'
import { traceSpans, tracingTo } from '../../../helpers/tracing.js'
import { createRequestSpans } from '../../../../src/gateway/observability/tracing/request-spans.js'
import { createEdgeSampler, ratioUpperBound, traceIdValue } from '../../../../src/shared/tracing/edge-sampler.js'
import { startTracing } from '../../../../src/shared/tracing/sdk.js'
import { tracingSettingsFromEnv } from '../../../../src/shared/tracing/settings.js'
import { TraceIds } from '../../../../src/shared/tracing/trace-ids.js'
import { parseTraceparent } from '../../../../src/shared/tracing/traceparent.js'

const GATEWAY = 'petstore-gateway'
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const SPAN = '00f067aa0ba902b7'
const noop = (): void => {}

/** The real SDK tracer, counting the spans it is asked for. */
function counting (tracer: Tracer): { tracer: Tracer, started: () => number } {
  let n = 0
  return {
    tracer: {
      startSpan (name: string, options?: SpanOptions, context?: Context): Span { n++; return tracer.startSpan(name, options, context) },
      startActiveSpan: tracer.startActiveSpan.bind(tracer)
    },
    started: () => n
  }
}

t.test('unsampled: no span is started, not even a non-recording one; sampled: the SDK gets the decided trace id', async (t) => {
  const app: FastifyInstance = Fastify()
  t.teardown(async () => { await app.close() })
  for (const [ratio, sampled] of [['0', false], ['1', true]] as const) {
    const settings = tracingSettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: ratio }, 'test')
    const ids = new TraceIds()
    const tracing = await startTracing(settings, { warn: noop }, { sampledBefore: ids })
    t.teardown(async () => { await tracing.shutdown() })
    const spy = counting(tracing.tracer)
    const hooks = createRequestSpans(app, spy.tracer, 'continue', { sampler: createEdgeSampler(settings), ids })
    t.teardown(() => { hooks.upstream.close() })
    const request = { id: 'r1', method: 'GET', url: '/v1/pets', protocol: 'http', ip: '127.0.0.1', headers: {}, log: app.log, trace: null } as unknown as FastifyRequest
    hooks.startServerSpan(request, {} as FastifyReply, noop)
    hooks.startLimiterSpan(request, {} as FastifyReply, noop)
    const trace = request.trace
    if (sampled) {
      t.equal(trace?.sampled, true, `ratio ${ratio}: sampled`)
      t.equal(spy.started(), 2, 'the server span and the limiter\'s')
      t.equal(trace?.sampled === true ? trace.span.spanContext().traceId.length : 0, 32)
      t.equal(hooks.upstream.size, 1, 'waiting for its upstream call')
    } else {
      t.equal(spy.started(), 0, `ratio ${ratio}: no span started`)
      t.equal(trace?.sampled, false)
      t.match(trace?.sampled === false ? trace.traceparent : '', /^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/, 'only a traceparent for the backend, sampled off')
      t.equal(hooks.upstream.size, 0, 'nothing waits for the upstream channels')
    }
  }
})

t.test('ratio at the edge: the backend\'s flag and the exported traces follow the trace id, as the SDK\'s ratio sampler would', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const echo = await startEchoUpstream(t)
  const gw = await startGateway(t, { backendUrl: echo.url, tracing: { settings: tracingTo(receiver.url, GATEWAY, { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.5' }) } })
  const REQUESTS = 30
  for (let i = 0; i < REQUESTS; i++) {
    const res = await fetch(`${gw.url}/v1/pets`, { headers: bearer(DEMO_KEYS.enterprise) })
    await res.arrayBuffer()
  }
  const sent = echo.received.map((r) => parseTraceparent(r.headers.traceparent))
  t.equal(sent.filter((p) => p !== undefined).length, REQUESTS, 'every backend request carries a traceparent')
  const bound = ratioUpperBound(0.5)
  t.same(sent.filter((p) => p !== undefined && p.sampled !== (traceIdValue(p.traceId) < bound)), [], 'sampled exactly when the trace id is under the ratio')
  const sampled = sent.filter((p) => p?.sampled === true).map((p) => p?.traceId ?? '')
  const unsampled = sent.filter((p) => p?.sampled === false).map((p) => p?.traceId ?? '')
  t.ok(sampled.length > 0 && unsampled.length > 0, `both kinds seen (${sampled.length} sampled, ${unsampled.length} not)`)
  for (const id of sampled) await traceSpans(receiver, id, 4)
  t.same(sampled.filter((id) => !receiver.spans.some((s) => s.traceId === id && s.name === 'GET /v1/pets')), [], 'each sampled trace exported under the id the backend got')
  t.same(unsampled.filter((id) => receiver.spans.some((s) => s.traceId === id)), [], 'nothing of an unsampled trace')
  const logged = new Set(gw.logs.filter((l) => l.msg === 'request').map((l) => l.traceId))
  t.same([...sampled, ...unsampled].filter((id) => !logged.has(id)), [], 'every trace id, sampled or not, in the request lines')
})

t.test('continue, unsampled parent: the backend gets the client\'s trace, a span id of the gateway\'s, sampled off, and the tracestate', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const echo = await startEchoUpstream(t)
  const gw = await startGateway(t, { backendUrl: echo.url, tracing: { settings: tracingTo(receiver.url, GATEWAY) } })
  const res = await fetch(`${gw.url}/v1/pets`, { headers: { ...bearer(DEMO_KEYS.pro), traceparent: `00-${TRACE}-${SPAN}-00`, tracestate: 'congo=t61rcWkgMzE' } })
  await res.arrayBuffer()
  const headers = echo.received[0]?.headers ?? {}
  const got = parseTraceparent(headers.traceparent)
  t.equal(got?.traceId, TRACE, 'the client\'s trace')
  t.ok(got !== undefined && got.spanId !== SPAN, 'a span id of the gateway\'s, not the client\'s')
  t.equal(got?.sampled, false, 'the parent said no (parent-based default)')
  t.equal(headers.tracestate, 'congo=t61rcWkgMzE')
  t.equal(gw.logs.find((l) => l.reqId === res.headers.get('x-request-id') && l.msg === 'request')?.traceId, TRACE)

  // always_on is not parent-based: an unsampled parent's trace is recorded all the same, as the SDK does.
  const receiver2 = await startOtlpReceiver(t)
  const always = await startGateway(t, { backendUrl: echo.url, tracing: { settings: tracingTo(receiver2.url, GATEWAY, { OTEL_TRACES_SAMPLER: 'always_on' }) } })
  await (await fetch(`${always.url}/v1/pets`, { headers: { ...bearer(DEMO_KEYS.pro), traceparent: `00-${TRACE}-${SPAN}-00` } })).arrayBuffer()
  t.equal(parseTraceparent(echo.received[1]?.headers.traceparent)?.sampled, true, 'always_on samples it')
  const spans = await traceSpans(receiver2, TRACE, 4)
  t.equal(spans.find((s) => s.name === 'GET /v1/pets')?.parentSpanId, SPAN, 'under the client\'s span')
})
