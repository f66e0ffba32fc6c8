import t from 'tap'
import { buildAdmin } from '../../../src/gateway/admin/app.js'
import { buildGateway } from '../../../src/gateway/app.js'
import type { LimiterStatus, RateLimitDecision } from '../../../src/gateway/limiter/decision.js'
import { createGatewayMetrics } from '../../../src/gateway/metrics/registry.js'
import { startEchoUpstream } from '../../helpers/echo-upstream.js'
import { bearer, DEMO_KEYS, startGateway, testConfig } from '../../helpers/gateway.js'
import { metricNames, parseScrape, sampleValue, scrape } from '../../helpers/scrape.js'

/** docs/decisions.md §9, verbatim. */
const REQUIRED_METRICS = [
  'gateway_requests_total',
  'gateway_request_duration_seconds',
  'gateway_upstream_duration_seconds',
  'gateway_ratelimit_rejections_total',
  'gateway_bans_total',
  'gateway_banned_keys',
  'gateway_deprecated_requests_total',
  'gateway_store_errors_total',
  'gateway_store_fallback_active',
  'gateway_config_reloads_total'
]
const PLANS = ['free', 'pro', 'business', 'enterprise', 'anonymous']
const PRO = bearer(DEMO_KEYS.pro)

function decision (policy: string, window: 'minute' | 'day'): RateLimitDecision {
  return { allowed: true, outcome: 'ok', policy, window, limit: 60, remaining: 59, reset: 1, retryAfter: undefined, banStarted: false, resetIn: 1, policyField: '', rejectedBy: undefined }
}

t.test('GET /metrics on the admin port: Prometheus text, process metrics, every docs/decisions.md §9 name from the first scrape', async (t) => {
  const gw = await startGateway(t)
  const res = await fetch(`${gw.adminUrl}/metrics`)
  t.equal(res.status, 200)
  t.equal(res.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8')
  const text = await res.text()
  const names = metricNames(text)
  for (const name of REQUIRED_METRICS) t.ok(names.has(name), name)
  for (const name of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds', 'nodejs_heap_size_used_bytes']) {
    t.ok(names.has(name), `default metric ${name}`)
  }

  const samples = parseScrape(text)
  for (const plan of PLANS) {
    t.equal(sampleValue(samples, 'gateway_requests_total', { route: '/v1/pets/:petId', method: 'GET', status: '200', plan }), 0)
    t.equal(sampleValue(samples, 'gateway_requests_total', { route: '/v1/pets', method: 'POST', status: '201', plan }), 0)
    t.equal(sampleValue(samples, 'gateway_bans_total', { plan }), 0)
    t.equal(sampleValue(samples, 'gateway_ratelimit_rejections_total', { plan, window: 'minute' }), 0)
    t.equal(sampleValue(samples, 'gateway_ratelimit_rejections_total', { plan, window: 'day' }), 0)
    t.equal(sampleValue(samples, 'gateway_ratelimit_rejections_total', { plan, window: 'ban' }), 0)
    t.equal(sampleValue(samples, 'gateway_deprecated_requests_total', { route: '/v1/pets/:petId', plan }), 0)
  }
  t.equal(sampleValue(samples, 'gateway_config_reloads_total', { result: 'success' }), 0)
  t.equal(sampleValue(samples, 'gateway_config_reloads_total', { result: 'failure' }), 0)
  t.equal(sampleValue(samples, 'gateway_store_errors_total'), 0)
  t.equal(sampleValue(samples, 'gateway_store_fallback_active'), 0)
  t.equal(sampleValue(samples, 'gateway_banned_keys'), 0)
  t.equal(sampleValue(samples, 'gateway_request_duration_seconds_count', { route: '/v1/store/orders' }), 0)
  t.equal(sampleValue(samples, 'gateway_upstream_duration_seconds_count', { route: '/v1/store/orders' }), 0)

  const publicSide = await fetch(`${gw.url}/metrics`, { headers: PRO })
  t.equal(publicSide.status, 404, 'never on the public port')
  t.same(await publicSide.json(), { code: 'route_not_found', message: 'No route GET /metrics', status: 404 })
})

t.test('requests are counted by route pattern, method, status and plan; raw paths never become labels', async (t) => {
  const gw = await startGateway(t)
  const calls: Array<[string, RequestInit]> = [
    ['/v1/pets/123456789', { headers: PRO }],
    ['/v1/pets/987654321', { headers: PRO }],
    ['/v1/pets', { headers: bearer(DEMO_KEYS.free) }],
    ['/v1/pets/1', {}],
    ['/no/such/path-abcdef', { headers: PRO }],
    ['/another/unknown-qwerty', { headers: PRO }],
    ['/v1/pets/1', { method: 'DELETE', headers: PRO }]
  ]
  for (const [path, init] of calls) await (await fetch(`${gw.url}${path}`, init)).arrayBuffer()

  const { text, samples } = await scrape(gw.adminUrl)
  t.equal(sampleValue(samples, 'gateway_requests_total', { route: '/v1/pets/:petId', method: 'GET', status: '404', plan: 'pro' }), 2)
  t.equal(sampleValue(samples, 'gateway_requests_total', { route: '/v1/pets', method: 'GET', status: '200', plan: 'free' }), 1)
  t.equal(sampleValue(samples, 'gateway_requests_total', { route: '/v1/pets/:petId', method: 'GET', status: '401', plan: 'anonymous' }), 1)
  t.equal(sampleValue(samples, 'gateway_requests_total', { route: 'unmatched', method: 'GET', status: '404', plan: 'pro' }), 2, 'unknown routes share one label value')
  t.equal(sampleValue(samples, 'gateway_requests_total', { route: '/v1/pets/:petId', method: 'DELETE', status: '405', plan: 'pro' }), 1)
  for (const raw of ['123456789', '987654321', 'abcdef', 'qwerty', 'demo-pro']) t.notOk(text.includes(raw), `${raw} is not in the scrape`)

  t.equal(sampleValue(samples, 'gateway_request_duration_seconds_count', { route: '/v1/pets/:petId' }), 4)
  t.equal(sampleValue(samples, 'gateway_request_duration_seconds_count', { route: 'unmatched' }), 2)
  t.equal(sampleValue(samples, 'gateway_upstream_duration_seconds_count', { route: '/v1/pets/:petId' }), 2, 'only the two proxied calls reached the backend')
  t.equal(sampleValue(samples, 'gateway_upstream_duration_seconds_count', { route: '/v1/pets' }), 1)
  const upstreamSum = sampleValue(samples, 'gateway_upstream_duration_seconds_sum', { route: '/v1/pets/:petId' }) ?? -1
  const totalSum = sampleValue(samples, 'gateway_request_duration_seconds_sum', { route: '/v1/pets/:petId' }) ?? -1
  t.ok(upstreamSum > 0 && upstreamSum < totalSum, `upstream time (${upstreamSum}) is part of the request time (${totalSum})`)
  t.equal(sampleValue(samples, 'gateway_request_duration_seconds_bucket', { route: '/v1/pets/:petId', le: '+Inf' }), 4)
  t.ok(samples.some((s) => s.name === 'gateway_request_duration_seconds_bucket' && s.labels.le === '0.0005'), 'sub-millisecond bucket')
  t.ok(samples.some((s) => s.name === 'gateway_request_duration_seconds_bucket' && s.labels.le === '10'), 'bucket at the upstream timeout')
})

t.test('upstream failures are timed too: a 502 from a dead backend is in gateway_upstream_duration_seconds', async (t) => {
  const upstream = await startEchoUpstream(t)
  upstream.behave((_req, res) => { res.socket?.destroy() })
  const gw = await startGateway(t, { backendUrl: upstream.url })
  const res = await fetch(`${gw.url}/v1/store/orders`, { headers: PRO })
  t.equal(res.status, 502)
  await res.arrayBuffer()
  const { samples } = await scrape(gw.adminUrl)
  t.equal(sampleValue(samples, 'gateway_upstream_duration_seconds_count', { route: '/v1/store/orders' }), 1)
  t.equal(sampleValue(samples, 'gateway_requests_total', { route: '/v1/store/orders', method: 'GET', status: '502', plan: 'pro' }), 1)
})

t.test('the limiter decision feeds rejections (by plan and window) and bans; the reload handle counts by result', async (t) => {
  const upstream = await startEchoUpstream(t)
  const app = await buildGateway({ config: testConfig(), backendUrl: upstream.url, logger: false })
  const decisions: Record<string, RateLimitDecision> = {
    limited: { ...decision('free', 'minute'), allowed: false, outcome: 'rate_limited', remaining: 0, retryAfter: 3 },
    limitedByDay: { ...decision('free', 'minute'), allowed: false, outcome: 'rate_limited', remaining: 0, retryAfter: 3000, rejectedBy: 'day' },
    banning: { ...decision('free', 'day'), allowed: false, outcome: 'key_banned', remaining: 0, retryAfter: 900, banStarted: true },
    banned: { ...decision('anonymous', 'minute'), allowed: false, outcome: 'key_banned', remaining: 0, retryAfter: 800 },
    ok: decision('free', 'minute')
  }
  // Stands in for the limiter: whatever it decided, this hook's decision is the one metrics read.
  app.addHook('onRequest', async (request) => {
    const name = request.headers['x-test-decision']
    if (typeof name === 'string') request.rateLimit = decisions[name] ?? null
  })
  const admin = await buildAdmin({ gateway: app })
  t.teardown(async () => { await app.close(); await admin.close() })
  await app.listen({ host: '127.0.0.1', port: 0 })
  await admin.listen({ host: '127.0.0.1', port: 0 })
  const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
  const adminUrl = `http://127.0.0.1:${(admin.server.address() as { port: number }).port}`

  for (const name of ['limited', 'limitedByDay', 'banning', 'banned', 'ok']) {
    await (await fetch(`${url}/v1/pets`, { headers: { ...bearer(DEMO_KEYS.free), 'x-test-decision': name } })).arrayBuffer()
  }
  app.metrics.configReloads.inc({ result: 'failure' })
  app.metrics.configReloads.inc({ result: 'success' })
  app.metrics.configReloads.inc({ result: 'success' })

  const { samples } = await scrape(adminUrl)
  t.equal(sampleValue(samples, 'gateway_ratelimit_rejections_total', { plan: 'free', window: 'minute' }), 1)
  t.equal(sampleValue(samples, 'gateway_ratelimit_rejections_total', { plan: 'free', window: 'day' }), 1, 'rejectedBy wins over the binding window')
  t.equal(sampleValue(samples, 'gateway_ratelimit_rejections_total', { plan: 'free', window: 'ban' }), 1, 'a key_banned answer counts as window="ban", not in a window')
  t.equal(sampleValue(samples, 'gateway_ratelimit_rejections_total', { plan: 'anonymous', window: 'ban' }), 1)
  t.equal(sampleValue(samples, 'gateway_ratelimit_rejections_total', { plan: 'anonymous', window: 'minute' }), 0)
  t.equal(sampleValue(samples, 'gateway_bans_total', { plan: 'free' }), 1)
  t.equal(sampleValue(samples, 'gateway_bans_total', { plan: 'anonymous' }), 0)
  t.equal(sampleValue(samples, 'gateway_config_reloads_total', { result: 'success' }), 2)
  t.equal(sampleValue(samples, 'gateway_config_reloads_total', { result: 'failure' }), 1)
})

t.test('store metrics are read from the limiter status at scrape time, and a failing ban count does not fail the scrape', async (t) => {
  let errors = 0
  let fallback = false
  let banned: () => Promise<number> = async () => 3
  const status: LimiterStatus = { storeErrors: () => errors, fallbackActive: () => fallback, bannedKeys: () => banned() }
  const metrics = createGatewayMetrics({ plans: ['free'], limiterStatus: () => status, defaultMetrics: false })

  let samples = parseScrape(await metrics.registry.metrics())
  t.equal(sampleValue(samples, 'gateway_banned_keys'), 3)
  t.equal(sampleValue(samples, 'gateway_store_fallback_active'), 0)
  t.equal(sampleValue(samples, 'gateway_store_errors_total'), 0)

  errors = 5
  fallback = true
  banned = async () => { throw new Error('store down') }
  samples = parseScrape(await metrics.registry.metrics())
  t.equal(sampleValue(samples, 'gateway_store_errors_total'), 5)
  t.equal(sampleValue(samples, 'gateway_store_fallback_active'), 1)
  t.equal(sampleValue(samples, 'gateway_banned_keys'), 3, 'last known value kept while the store is unreachable')

  errors = 7
  samples = parseScrape(await metrics.registry.metrics())
  t.equal(sampleValue(samples, 'gateway_store_errors_total'), 7, 'a counter that follows the limiter total')
})

t.test('with metrics: false nothing is recorded per request, and /metrics still answers', async (t) => {
  const gw = await startGateway(t, { metrics: false })
  await (await fetch(`${gw.url}/v1/pets`, { headers: PRO })).arrayBuffer()
  const { text, samples } = await scrape(gw.adminUrl)
  t.equal(sampleValue(samples, 'gateway_requests_total', { route: '/v1/pets', method: 'GET', status: '200', plan: 'pro' }), 0)
  t.notOk(metricNames(text).has('process_cpu_user_seconds_total'))
})

t.test('/readyz has a config check next to the backend check', async (t) => {
  const gw = await startGateway(t)
  const res = await fetch(`${gw.adminUrl}/readyz`)
  t.equal(res.status, 200)
  t.match(await res.json(), { status: 'ready', checks: { config: { ok: true }, backend: { ok: true }, draining: { ok: true } } })
})

t.test('with the real limiter: anonymous traffic over its 30/min is counted as rejections of the anonymous plan', async (t) => {
  const gw = await startGateway(t)
  const statuses: number[] = []
  for (let i = 0; i < 32; i++) {
    const res = await fetch(`${gw.url}/v1/pets`)
    statuses.push(res.status)
    await res.arrayBuffer()
  }
  const rejected = statuses.filter((s) => s === 429).length
  t.equal(statuses.filter((s) => s === 401).length, 30)
  t.equal(rejected, 2)
  const { samples } = await scrape(gw.adminUrl)
  t.equal(sampleValue(samples, 'gateway_ratelimit_rejections_total', { plan: 'anonymous', window: 'minute' }), rejected)
  t.equal(sampleValue(samples, 'gateway_requests_total', { route: '/v1/pets', method: 'GET', status: '429', plan: 'anonymous' }), rejected)
  const line = gw.logs.filter((l) => l.msg === 'request').at(-1)
  t.match(line, { status: 429, rateLimit: { outcome: 'rate_limited', policy: 'anonymous', remaining: 0 } }, 'the log line carries the limiter decision')
})
