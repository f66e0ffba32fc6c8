import t from 'tap'
import type { LimiterStatus } from '../../../../src/gateway/observability/metrics/limiter-status.js'
import { createGatewayMetrics } from '../../../../src/gateway/observability/metrics/registry.js'
import { startEchoUpstream } from '../../../helpers/echo-upstream.js'
import { startGateway } from '../../../helpers/gateway.js'
import { bearer, DEMO_KEYS, plansYaml, testConfig } from '../../../helpers/config-fixture.js'
import { EVENT_TIMEOUT_MS, until } from '../../../helpers/poll.js'
import { startRedis } from '../../../helpers/redis.js'
import { metricNames, parseScrape, sampleValue, scrape } from '../../../helpers/scrape.js'

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

t.test('real rejections and a real ban on Redis feed the rejection and ban metrics; the reload handle counts by result', async (t) => {
  const redis = await startRedis(t)
  const upstream = await startEchoUpstream(t)
  const config = testConfig({
    'plans.yaml': plansYaml({
      free: { perMinute: 3, perDay: 1000 },
      // perDay ≥ perMinute is a config rule: both windows fill at 2, and the day's frees capacity last, so it rejects.
      pro: { perMinute: 2, perDay: 2 },
      anonymous: { perMinute: 1, perDay: 1000 },
      ban: { threshold: 2, windowSeconds: 60, durationSeconds: 60, maxDurationSeconds: 120 }
    })
  })
  const gw = await startGateway(t, { config, backendUrl: upstream.url, limiter: { settings: { redisUrl: redis.url } } })
  const statuses = async (headers: Record<string, string>, n: number): Promise<string[]> => {
    const out: string[] = []
    for (let i = 0; i < n; i++) {
      const res = await fetch(`${gw.url}/v1/pets`, { headers })
      const body = await res.json() as { code?: string }
      out.push(res.status === 429 ? `429 ${body.code ?? ''}` : String(res.status))
    }
    return out
  }
  // free: 3 a minute; the 3rd 429 is more than ban.threshold (2) and starts a ban; the next is served from the ban.
  t.strictSame(await statuses(bearer(DEMO_KEYS.free), 7), ['200', '200', '200', '429 rate_limited', '429 rate_limited', '429 key_banned', '429 key_banned'])
  // pro: 2 a day, so the day window rejects.
  t.strictSame(await statuses(PRO, 3), ['200', '200', '429 rate_limited'])
  // anonymous: 1 a minute per client address (401 once counted).
  t.strictSame(await statuses({}, 2), ['401', '429 rate_limited'])
  t.match(await redis.cli('KEYS', '*'), /free|ban/, 'the limiter counted in Redis')

  // The count is refreshed in the background soon after this process starts a ban.
  await until('the ban counted', () => gw.app.limiterStatus.bannedKeys() === 1, EVENT_TIMEOUT_MS)
  gw.app.metrics.configReloads.inc({ result: 'failure' })
  gw.app.metrics.configReloads.inc({ result: 'success' })
  gw.app.metrics.configReloads.inc({ result: 'success' })

  const { samples } = await scrape(gw.adminUrl)
  t.equal(sampleValue(samples, 'gateway_ratelimit_rejections_total', { plan: 'free', window: 'minute' }), 2, 'two 429s of the minute window')
  t.equal(sampleValue(samples, 'gateway_ratelimit_rejections_total', { plan: 'free', window: 'ban' }), 2, 'the 429 that started the ban and the one served from it count as window="ban"')
  t.equal(sampleValue(samples, 'gateway_ratelimit_rejections_total', { plan: 'free', window: 'day' }), 0)
  t.equal(sampleValue(samples, 'gateway_ratelimit_rejections_total', { plan: 'pro', window: 'day' }), 1, 'rejected by the day window')
  t.equal(sampleValue(samples, 'gateway_ratelimit_rejections_total', { plan: 'pro', window: 'minute' }), 0)
  t.equal(sampleValue(samples, 'gateway_ratelimit_rejections_total', { plan: 'anonymous', window: 'minute' }), 1)
  t.equal(sampleValue(samples, 'gateway_ratelimit_rejections_total', { plan: 'anonymous', window: 'ban' }), 0, 'anonymous clients are never banned')
  t.equal(sampleValue(samples, 'gateway_bans_total', { plan: 'free' }), 1, 'one ban started, whatever the requests it refused')
  t.equal(sampleValue(samples, 'gateway_bans_total', { plan: 'pro' }), 0)
  t.equal(sampleValue(samples, 'gateway_bans_total', { plan: 'anonymous' }), 0)
  t.equal(sampleValue(samples, 'gateway_banned_keys'), 1, 'the ban this process started is counted')
  t.equal(sampleValue(samples, 'gateway_requests_total', { route: '/v1/pets', method: 'GET', status: '429', plan: 'free' }), 4)
  t.equal(sampleValue(samples, 'gateway_config_reloads_total', { result: 'success' }), 2)
  t.equal(sampleValue(samples, 'gateway_config_reloads_total', { result: 'failure' }), 1)

  await redis.cli('CONFIG', 'RESETSTAT')
  const again = await scrape(gw.adminUrl)
  t.equal(sampleValue(again.samples, 'gateway_banned_keys'), 1, 'a later scrape still shows the ban')
  const commands = (await redis.cli('INFO', 'commandstats')).split('\n').map((line) => /^cmdstat_([^:]+):/.exec(line.trim())?.[1]).filter((c) => c !== undefined)
  t.same(commands.filter((c) => c !== 'config|resetstat' && c !== 'info'), [], 'a scrape sends Redis nothing: no SCAN, no read')
})

t.test('store metrics are read from the limiter status at scrape time, and a missing ban count keeps the last one', async (t) => {
  let errors = 0
  let fallback = false
  let banned: number | undefined = 3
  const status: LimiterStatus = { storeErrors: () => errors, fallbackActive: () => fallback, bannedKeys: () => banned }
  const metrics = createGatewayMetrics({ plans: ['free'], limiterStatus: () => status, defaultMetrics: false })

  let samples = parseScrape(await metrics.registry.metrics())
  t.equal(sampleValue(samples, 'gateway_banned_keys'), 3)
  t.equal(sampleValue(samples, 'gateway_store_fallback_active'), 0)
  t.equal(sampleValue(samples, 'gateway_store_errors_total'), 0)

  errors = 5
  fallback = true
  banned = undefined
  samples = parseScrape(await metrics.registry.metrics())
  t.equal(sampleValue(samples, 'gateway_store_errors_total'), 5)
  t.equal(sampleValue(samples, 'gateway_store_fallback_active'), 1)
  t.equal(sampleValue(samples, 'gateway_banned_keys'), 3, 'no count (the store unreachable since start): the last value stays')

  errors = 7
  samples = parseScrape(await metrics.registry.metrics())
  t.equal(sampleValue(samples, 'gateway_store_errors_total'), 7, 'a counter that follows the limiter total')
})

t.test('outage admissions by kind follow the limiter totals', async (t) => {
  const admitted = { reserve: 0, allowance: 0 }
  const status: LimiterStatus = { storeErrors: () => 0, fallbackActive: () => true, bannedKeys: () => 0, outageAdmissions: () => ({ ...admitted }) }
  const metrics = createGatewayMetrics({ plans: ['free'], limiterStatus: () => status, defaultMetrics: false })
  let samples = parseScrape(await metrics.registry.metrics())
  t.same(['reserve', 'allowance'].map((kind) => sampleValue(samples, 'gateway_store_outage_admissions_total', { kind })), [0, 0], 'both kinds from the first scrape')
  Object.assign(admitted, { reserve: 4, allowance: 9 })
  samples = parseScrape(await metrics.registry.metrics())
  t.same(['reserve', 'allowance'].map((kind) => sampleValue(samples, 'gateway_store_outage_admissions_total', { kind })), [4, 9])
})

t.test('with metrics: false nothing is recorded per request, and /metrics still answers', async (t) => {
  const gw = await startGateway(t, { metrics: false })
  await (await fetch(`${gw.url}/v1/pets`, { headers: PRO })).arrayBuffer()
  const { text, samples } = await scrape(gw.adminUrl)
  t.equal(sampleValue(samples, 'gateway_requests_total', { route: '/v1/pets', method: 'GET', status: '200', plan: 'pro' }), 0)
  t.notOk(metricNames(text).has('process_cpu_user_seconds_total'))
})

t.test('/readyz has the backend check, and no config check (the config in force is always a valid one)', async (t) => {
  const gw = await startGateway(t)
  const res = await fetch(`${gw.adminUrl}/readyz`)
  t.equal(res.status, 200)
  const body = await res.json() as { checks: Record<string, unknown> }
  t.match(body, { status: 'ready', checks: { backend: { ok: true }, draining: { ok: true } } })
  t.notOk('config' in body.checks)
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
