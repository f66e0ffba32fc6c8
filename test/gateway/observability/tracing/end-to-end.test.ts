// One request followed from the client through the gateway into the backend and SQLite, as ops would
// see it in Jaeger: a real gateway and a real backend (each with its own SDK, talking real HTTP), an
// OTLP/HTTP endpoint served here that decodes what the SDKs really sent (protobuf and JSON), a client
// `traceparent`. Checks the backend continued the same trace, the spans form one tree with the
// attributes docs/tracing.md promises and no secret, a 429 and a 502 show up as such, and the trace id
// is in every log line of the request on both sides, next to the request id.
import t, { type Test } from 'tap'
import { startBackend } from '../../../helpers/backend.js'
import { startGateway } from '../../../helpers/gateway.js'
import { bearer, DEMO_KEYS, plansYaml, testConfig } from '../../../helpers/config-fixture.js'
import { SPAN_KIND, STATUS_ERROR, startOtlpReceiver, type ReceivedSpan } from '../../../helpers/otlp-receiver.js'
import { freePort } from '../../../helpers/ports.js'
import { childrenOf, leaks, secretsOf, theSpan, traceSpans, tracingTo } from '../../../helpers/tracing.js'

const CLIENT_TRACE = '0af7651916cd43dd8448eb211c80319c'
const CLIENT_SPAN = 'b7ad6b7169203331'
const CLIENT_TRACESTATE = 'vendor=opaque-value'
const GATEWAY = 'petstore-gateway'
const BACKEND = 'petstore-backend'

function only (t: Test, spans: ReceivedSpan[], what: string): ReceivedSpan {
  t.equal(spans.length, 1, `one ${what}`)
  return spans[0] as ReceivedSpan
}

/** Every log line of request `reqId` carries `traceId`, right after the request id. */
function assertLogged (t: Test, lines: Array<Record<string, unknown>>, reqId: string, traceId: string, where: string): void {
  const mine = lines.filter((l) => l.reqId === reqId)
  t.ok(mine.length >= 1, `${where}: the request logged ${mine.length} line(s)`)
  for (const line of mine) {
    t.equal(line.traceId, traceId, `${where}: "${String(line.msg)}" carries the trace id`)
    const keys = Object.keys(line)
    t.equal(keys.indexOf('traceId'), keys.indexOf('reqId') + 1, `${where}: next to the request id`)
  }
}

for (const protocol of ['http/protobuf', 'http/json'] as const) {
  t.test(`${protocol}: one tree from the gateway's server span to the SQLite statement, the client's trace continued`, async (t) => {
    const receiver = await startOtlpReceiver(t)
    const env = { OTEL_EXPORTER_OTLP_PROTOCOL: protocol }
    const backend = await startBackend(t, { tracing: tracingTo(receiver.url, BACKEND, env), logs: true })
    const gw = await startGateway(t, { backendUrl: backend.url, tracing: { settings: tracingTo(receiver.url, GATEWAY, env) } })

    const res = await fetch(`${gw.url}/v1/pets?limit=5`, {
      headers: { ...bearer(DEMO_KEYS.pro), traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`, tracestate: CLIENT_TRACESTATE }
    })
    t.equal(res.status, 200)
    await res.arrayBuffer()
    const requestId = res.headers.get('x-request-id') ?? ''
    const spans = await traceSpans(receiver, CLIENT_TRACE, 7)
    t.equal(spans.length, 7, 'server, limiter, upstream, connection wait, backend request, handler, SQLite')
    t.ok(receiver.contentTypes.every((c) => c.startsWith(protocol === 'http/json' ? 'application/json' : 'application/x-protobuf')), `exported as ${protocol}`)

    const server = theSpan(spans, CLIENT_TRACE, GATEWAY, 'GET /v1/pets')
    t.equal(server.kind, SPAN_KIND.server)
    t.equal(server.parentSpanId, CLIENT_SPAN, 'the client\'s span is the parent: its trace is continued')
    t.equal(server.traceState, CLIENT_TRACESTATE, 'with its tracestate')
    t.match(server.attributes, {
      'http.request.method': 'GET',
      'http.route': '/v1/pets',
      'http.response.status_code': 200,
      'url.path': '/v1/pets',
      'url.scheme': 'http',
      'client.address': '127.0.0.1',
      'petstore.request_id': requestId,
      'petstore.consumer.id': 'demo-pro',
      'petstore.plan': 'pro'
    })
    t.equal(server.status.code, 0, 'a 200 leaves the status unset')

    const limiter = theSpan(spans, CLIENT_TRACE, GATEWAY, 'rate limit')
    t.equal(limiter.parentSpanId, server.spanId, 'limiter under the server span')
    t.equal(limiter.kind, SPAN_KIND.internal)
    t.match(limiter.attributes, {
      'petstore.consumer.id': 'demo-pro',
      'petstore.plan': 'pro',
      'petstore.ratelimit.outcome': 'ok',
      'petstore.ratelimit.store': 'memory',
      'petstore.ratelimit.window': 'minute',
      'petstore.ratelimit.remaining': 299
    })
    t.notOk('petstore.ratelimit.retry_after' in limiter.attributes, 'no Retry-After on an admitted request')

    const upstream = theSpan(spans, CLIENT_TRACE, GATEWAY, 'GET')
    t.equal(upstream.kind, SPAN_KIND.client)
    t.equal(upstream.parentSpanId, server.spanId, 'upstream call under the server span')
    t.match(upstream.attributes, {
      'http.request.method': 'GET',
      'server.address': '127.0.0.1',
      'server.port': backend.port,
      'url.full': `${backend.url}/v1/pets`,
      'http.response.status_code': 200
    })
    const connection = theSpan(spans, CLIENT_TRACE, GATEWAY, 'upstream connection')
    t.equal(connection.parentSpanId, upstream.spanId, 'the connection wait is part of the upstream call')
    t.equal(typeof connection.attributes['petstore.upstream.new_connection'], 'boolean')
    t.ok(connection.startNs >= upstream.startNs && connection.endNs <= upstream.endNs, 'and within it')

    const backendServer = only(t, childrenOf(spans, upstream).filter((s) => s.resource['service.name'] === BACKEND), 'backend span under the upstream call')
    t.equal(backendServer.resource['service.name'], BACKEND, 'the backend continued the gateway\'s traceparent')
    t.equal(backendServer.kind, SPAN_KIND.server)
    t.equal(backendServer.name, 'GET /v1/pets')
    t.equal(backendServer.traceState, CLIENT_TRACESTATE, 'the tracestate travelled on to the backend')
    t.match(backendServer.attributes, { 'http.route': '/v1/pets', 'http.response.status_code': 200, 'url.path': '/v1/pets', 'petstore.request_id': requestId })
    const handler = only(t, childrenOf(spans, backendServer), 'span under the backend request')
    t.equal(handler.name, 'handler - listPets')
    const sqlite = only(t, childrenOf(spans, handler), 'span under the handler')
    t.equal(sqlite.name, 'SELECT pets')
    t.equal(sqlite.kind, SPAN_KIND.client)
    t.match(sqlite.attributes, { 'db.system.name': 'sqlite', 'db.operation.name': 'SELECT', 'db.collection.name': 'pets', 'db.response.returned_rows': 0 })
    t.match(sqlite.attributes['db.query.text'], /^SELECT .* FROM pets WHERE id > \? ORDER BY id LIMIT \?$/, 'the parameterised statement, no values')

    t.same(leaks(receiver, secretsOf(DEMO_KEYS.pro)), [], 'no key, digest or Authorization anywhere in what was exported')
    assertLogged(t, gw.logs, requestId, CLIENT_TRACE, 'gateway')
    assertLogged(t, backend.logs, requestId, CLIENT_TRACE, 'backend')
  })
}

t.test('a 429 shows up as the limiter\'s decision, with its Retry-After, and never reaches the backend', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const backend = await startBackend(t, { tracing: tracingTo(receiver.url, BACKEND) })
  const gw = await startGateway(t, {
    backendUrl: backend.url,
    config: testConfig({ 'plans.yaml': plansYaml({ free: { perMinute: 1, perDay: 100 } }) }),
    tracing: { settings: tracingTo(receiver.url, GATEWAY) }
  })
  const traces = ['1', '2'].map((n) => n.repeat(32))
  const statuses: number[] = []
  let retryAfter = ''
  for (const trace of traces) {
    const res = await fetch(`${gw.url}/v1/pets`, { headers: { ...bearer(DEMO_KEYS.free), traceparent: `00-${trace}-${CLIENT_SPAN}-01` } })
    await res.arrayBuffer()
    statuses.push(res.status)
    retryAfter = res.headers.get('retry-after') ?? ''
  }
  t.same(statuses, [200, 429])
  const spans = await traceSpans(receiver, traces[1] as string, 2)
  const server = theSpan(spans, traces[1] as string, GATEWAY, 'GET /v1/pets')
  t.equal(server.attributes['http.response.status_code'], 429)
  t.equal(server.status.code, 0, 'a 4xx is the client\'s, not an error of the server span')
  const limiter = theSpan(spans, traces[1] as string, GATEWAY, 'rate limit')
  t.match(limiter.attributes, { 'petstore.ratelimit.outcome': 'rate_limited', 'petstore.plan': 'free', 'petstore.consumer.id': 'demo-free' })
  t.equal(String(limiter.attributes['petstore.ratelimit.retry_after']), retryAfter, 'Retry-After as the response said')
  // The SDK anchors each span's clock to Date.now() (whole ms) when it starts and measures from there,
  // so two spans ending within a millisecond of each other can read in either order.
  t.ok(limiter.endNs <= server.endNs + 1_000_000n, `the limiter span ended (in the error path) within the request (${Number(limiter.endNs - server.endNs) / 1e6} ms after the server span's end)`)
  await receiver.waitFor('the first trace', (all) => all.some((s) => s.traceId === traces[0] && s.name === 'SELECT pets'))
  t.equal(receiver.spans.filter((s) => s.traceId === traces[1]).length, 2, 'server and limiter only: no upstream call, no backend span')
})

t.test('an unreachable backend: the upstream call and the server span carry the error', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const gw = await startGateway(t, { backendUrl: `http://127.0.0.1:${await freePort()}`, tracing: { settings: tracingTo(receiver.url, GATEWAY) } })
  const trace = '3'.repeat(32)
  const res = await fetch(`${gw.url}/v1/pets`, { headers: { ...bearer(DEMO_KEYS.pro), traceparent: `00-${trace}-${CLIENT_SPAN}-01` } })
  t.equal(res.status, 502)
  await res.arrayBuffer()
  const spans = await traceSpans(receiver, trace, 4)
  const server = theSpan(spans, trace, GATEWAY, 'GET /v1/pets')
  t.equal(server.status.code, STATUS_ERROR, 'a 5xx sets the server span\'s status')
  t.equal(server.attributes['error.type'], 'upstream_unavailable', 'error.type is the catalogue code')
  const upstream = theSpan(spans, trace, GATEWAY, 'GET')
  t.equal(upstream.status.code, STATUS_ERROR)
  t.equal(upstream.attributes['error.type'], 'ECONNREFUSED')
  t.equal(theSpan(spans, trace, GATEWAY, 'upstream connection').parentSpanId, upstream.spanId, 'the connection wait ended with the failed call')
})
