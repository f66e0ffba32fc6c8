// The gateway's spans in the cases the end-to-end trace does not take: an anonymous request, a method
// outside HTTP's registry, a ban starting, a backend's 4xx (the upstream call's error, not the
// server's) — and the table of requests waiting for their upstream call, which must empty whatever
// the outcome, and stays bounded even if a response never finishes.
import t from 'tap'
import { request as httpRequest } from 'node:http'
import { ROOT_CONTEXT, trace } from '@opentelemetry/api'
import { startGateway } from '../../../helpers/gateway.js'
import { bearer, DEMO_KEYS, plansYaml, testConfig } from '../../../helpers/config-fixture.js'
import { STATUS_ERROR, startOtlpReceiver } from '../../../helpers/otlp-receiver.js'
import { theSpan, traceSpans, tracingTo } from '../../../helpers/tracing.js'
import { UpstreamSpans } from '../../../../src/gateway/observability/tracing/upstream-spans.js'
import type { SampledTrace } from '../../../../src/gateway/observability/tracing/request-trace.js'

const GATEWAY = 'petstore-gateway'
const PARENT = '9'.repeat(16)

function traceOf (n: number): string {
  return n.toString(16).padStart(32, 'b')
}

async function get (url: string, path: string, trace: string, key?: string): Promise<number> {
  const res = await fetch(`${url}${path}`, { headers: { ...(key === undefined ? {} : bearer(key)), traceparent: `00-${trace}-${PARENT}-01` } })
  await res.arrayBuffer()
  return res.status
}

/** A request with any method token, which fetch() would refuse to send. */
async function rawRequest (url: string, method: string, traceparent: string): Promise<number> {
  return await new Promise((resolve, reject) => {
    const req = httpRequest(`${url}/v1/pets`, { method, headers: { traceparent } }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode ?? 0)) })
    req.on('error', reject)
    req.end()
  })
}

t.test('anonymous, unknown method, ban, backend 404 — and the waiting table empties', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const gw = await startGateway(t, {
    config: testConfig({ 'plans.yaml': plansYaml({ free: { perMinute: 1, perDay: 100 }, ban: { threshold: 1 } }) }),
    tracing: { settings: tracingTo(receiver.url, GATEWAY) }
  })

  t.equal(await get(gw.url, '/v1/pets', traceOf(1)), 401, 'no key')
  const anonymous = await traceSpans(receiver, traceOf(1), 2)
  const server = theSpan(anonymous, traceOf(1), GATEWAY, 'GET /v1/pets')
  t.equal(server.attributes['petstore.plan'], 'anonymous')
  t.notOk('petstore.consumer.id' in server.attributes, 'no consumer id without a key')
  t.equal(theSpan(anonymous, traceOf(1), GATEWAY, 'rate limit').attributes['petstore.plan'], 'anonymous', 'counted under the anonymous policy')

  t.equal(await rawRequest(gw.url, 'PROPFIND', `00-${traceOf(2)}-${PARENT}-01`), 401, 'keyless: 401 comes before routing')
  const other = theSpan(await traceSpans(receiver, traceOf(2), 2), traceOf(2), GATEWAY, 'PROPFIND')
  t.equal(other.attributes['http.request.method'], '_OTHER', 'a method outside the registry is _OTHER')
  t.equal(other.attributes['http.request.method_original'], 'PROPFIND')
  t.notOk('http.route' in other.attributes, 'no route for an unmatched path')

  const statuses: number[] = []
  for (let n = 3; n <= 5; n++) statuses.push(await get(gw.url, '/v1/pets', traceOf(n), DEMO_KEYS.free))
  t.same(statuses, [200, 429, 429])
  const limiters = await Promise.all([4, 5].map(async (n) => theSpan(await traceSpans(receiver, traceOf(n), 2), traceOf(n), GATEWAY, 'rate limit')))
  t.ok(limiters.some((s) => s.attributes['petstore.ratelimit.ban_started'] === true), 'the 429 that started the ban says so')

  t.equal(await get(gw.url, '/v1/pets/999', traceOf(6), DEMO_KEYS.pro), 404, 'a pet that does not exist')
  const notFound = await traceSpans(receiver, traceOf(6), 4)
  const upstream = theSpan(notFound, traceOf(6), GATEWAY, 'GET')
  t.equal(upstream.status.code, STATUS_ERROR, 'the backend\'s 404 is the upstream call\'s error')
  t.equal(upstream.attributes['error.type'], '404')
  t.equal(theSpan(notFound, traceOf(6), GATEWAY, 'GET /v1/pets/:petId').status.code, 0, 'but not the server span\'s: a 4xx is the client\'s')

  t.equal(gw.app.tracingHooks?.upstream.size, 0, 'no request left waiting for an upstream call')
})

t.test('client.address is the client\'s, as TRUST_PROXY reads X-Forwarded-For, not the proxy\'s', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const gw = await startGateway(t, { trustProxy: 1, tracing: { settings: tracingTo(receiver.url, GATEWAY) } })
  const res = await fetch(`${gw.url}/v1/pets`, { headers: { ...bearer(DEMO_KEYS.pro), traceparent: `00-${traceOf(8)}-${PARENT}-01`, 'x-forwarded-for': '203.0.113.7' } })
  t.equal(res.status, 200)
  await res.arrayBuffer()
  const server = theSpan(await traceSpans(receiver, traceOf(8), 4), traceOf(8), GATEWAY, 'GET /v1/pets')
  t.equal(server.attributes['client.address'], '203.0.113.7')
})

t.test('the waiting table is bounded: the oldest entry goes first', async (t) => {
  const upstream = new UpstreamSpans(trace.getTracer('test'), 2)
  t.teardown(() => upstream.close())
  const entry = (): SampledTrace => ({ sampled: true, span: trace.wrapSpanContext({ traceId: traceOf(7), spanId: PARENT, traceFlags: 1 }), context: ROOT_CONTEXT, limiter: undefined, errorType: undefined })
  upstream.expect('a', entry())
  upstream.expect('b', entry())
  upstream.expect('c', entry())
  t.equal(upstream.size, 2)
  upstream.forget('a')
  t.equal(upstream.size, 2, '"a" was already evicted')
  upstream.forget('b')
  upstream.forget('c')
  t.equal(upstream.size, 0)
})
