// Monthly quotas, costs and soft quotas through a real gateway on the in-process store and an
// injected clock, every answer fully asserted: a cost of 5 on a key with 10 per minute admits exactly
// 2 a minute and never a part of a request; a month used up is 429 quota_exceeded (also when a
// shorter window is full too) with Retry-After until every full window admits one more and the
// headers naming the month when it binds; quota refusals never ban; a soft quota (overage: allow)
// admits past perMonth with X-Quota-Overage and counts gateway_quota_overage_total; the consumers
// near their month show in gateway_quota_consumers_near_limit and GET /admin/quotas/near-limit.
import t from 'tap'
import { startGateway } from '../../helpers/gateway.js'
import { DEMO_KEYS, plansYaml, testConfig } from '../../helpers/config-fixture.js'
import { call, COST_ROUTES, meteredMonth, unix } from '../../helpers/quota.js'
import { parseScrape, sampleValue, scrape } from '../../helpers/scrape.js'

const MARCH_SECONDS = 31 * 86_400

t.test('cost 5 on a key with 10 per minute: exactly 2 admitted in the minute, the third 429 with nothing left; a cheaper request still fits', async (t) => {
  let clock = Date.parse('2030-03-14T12:00:00.500Z')
  const gw = await startGateway(t, {
    config: testConfig({ 'plans.yaml': plansYaml({ free: { perMinute: 10, perDay: 1000 }, pro: { perMinute: 10, perDay: 1000 } }), 'routes.yaml': COST_ROUTES }),
    now: () => clock
  })
  const policy = '"minute";q=10;w=60, "day";q=1000;w=86400'
  const reset = String(unix('2030-03-14T12:01:01Z'))
  t.same(await call(gw, DEMO_KEYS.free, true), {
    status: 201, code: undefined, message: undefined,
    headers: { 'x-ratelimit-limit': '10', 'x-ratelimit-remaining': '5', 'x-ratelimit-reset': reset, 'ratelimit-policy': policy, ratelimit: '"minute";r=5;t=61' }
  }, 'the first: 5 units spent of 10')
  t.same((await call(gw, DEMO_KEYS.free, true)).headers['x-ratelimit-remaining'], '0', 'the second: 10 of 10')
  t.same(await call(gw, DEMO_KEYS.free, true), {
    status: 429, code: 'rate_limited', message: 'Rate limit exceeded for the minute window; retry after 61 s',
    headers: { 'x-ratelimit-limit': '10', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset, 'ratelimit-policy': policy, ratelimit: '"minute";r=0;t=61', 'retry-after': '61' }
  }, 'the third: refused whole')
  clock += 59_000
  t.equal((await call(gw, DEMO_KEYS.free)).status, 429, 'within the minute even one unit is refused')
  clock = Date.parse('2030-03-14T12:01:01Z')
  t.equal((await call(gw, DEMO_KEYS.free, true)).status, 201, 'the minute has let go of the first second: 5 units again')

  // Units left, not requests: 6 GETs leave 4, a POST of 5 does not fit (never a partial admission), a GET still does.
  for (let i = 0; i < 6; i++) await call(gw, DEMO_KEYS.pro)
  const post = await call(gw, DEMO_KEYS.pro, true)
  t.match(post, { status: 429, code: 'rate_limited', headers: { 'x-ratelimit-limit': '10', 'x-ratelimit-remaining': '4' } }, 'Remaining: the 4 units left, too few for 5')
  t.match(await call(gw, DEMO_KEYS.pro), { status: 200, headers: { 'x-ratelimit-remaining': '3' } })

  const usage = await (await fetch(`${gw.adminUrl}/admin/consumers/demo-free/usage?from=2030-03-14&to=2030-03-14`)).json() as { days: unknown[] }
  t.same(usage.days, [{ date: '2030-03-14', admitted: 3, units: 15, rejected: 2, total: 5, overage: 0 }], 'the history counts units and requests')
})

t.test('a month used up: quota_exceeded with its headers, also when the minute is full too; Retry-After waits for every full window; no ban', async (t) => {
  const { gw, at } = await meteredMonth(t)
  const policy = `"minute";q=10;w=60, "day";q=15;w=86400, "month";q=20;w=${MARCH_SECONDS}`
  const monthEnd = unix('2030-04-01T00:00:00Z')

  // 23:00:30: the minute (10) and the month (20) are both full: the month names the refusal, and Retry-After waits for it.
  t.same(await call(gw, DEMO_KEYS.free), {
    status: 429, code: 'quota_exceeded', message: 'Monthly quota used up (it renews at 00:00 UTC on the 1st); retry after 3570 s',
    headers: { 'x-ratelimit-limit': '10', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(unix('2030-03-31T23:01:01Z')), 'ratelimit-policy': policy, ratelimit: '"minute";r=0;t=31', 'retry-after': '3570' }
  }, 'minute and month full: quota_exceeded; the minute binds the headers (fewest left, the shorter on a tie)')

  // 23:02: the minute is free again, the month binds.
  at('2030-03-31T23:02:00Z')
  t.same(await call(gw, DEMO_KEYS.free), {
    status: 429, code: 'quota_exceeded', message: 'Monthly quota used up (it renews at 00:00 UTC on the 1st); retry after 3480 s',
    headers: { 'x-ratelimit-limit': '20', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(monthEnd), 'ratelimit-policy': policy, ratelimit: '"month";r=0;t=3480', 'retry-after': '3480' }
  }, 'the month binds: X-RateLimit-Limit is the quota, the reset its end')
  const admin = await (await fetch(`${gw.adminUrl}/admin/consumers/demo-free`)).json() as { limits: unknown, usage: { month: unknown } }
  t.same(admin.limits, { perMinute: 10, perDay: 15, perMonth: 20, overage: false })
  t.same(admin.usage.month, { count: 20, limit: 20, remaining: 0, resetAt: '2030-04-01T00:00:00.000Z', overageAllowed: false, overage: 0, shadow: null })

  // Far past the ban threshold (30 in 60 s): a consumer out of quota is not flooding.
  const codes = new Set<string | undefined>()
  for (let i = 0; i < 40; i++) codes.add((await call(gw, DEMO_KEYS.free)).code)
  t.same([...codes], ['quota_exceeded'], '40 more: all quota_exceeded, never key_banned')
  const bans = await (await fetch(`${gw.adminUrl}/admin/bans`)).json() as { bans: unknown[] }
  t.same(bans.bans, [])

  // pro: day and month of 10, spent at 23:50 on the 31st. The month renews at midnight, the day later: Retry-After waits for the day.
  at('2030-03-31T23:50:00Z')
  for (let i = 0; i < 10; i++) await call(gw, DEMO_KEYS.pro)
  at('2030-03-31T23:52:00Z')
  const dayFrees = unix('2030-04-02T00:00:00Z') // the day's 15-minute bucket from 23:45, after 24 h 15 min
  t.same(await call(gw, DEMO_KEYS.pro), {
    status: 429, code: 'quota_exceeded', message: `Monthly quota used up (it renews at 00:00 UTC on the 1st); retry after ${dayFrees - unix('2030-03-31T23:52:00Z')} s`,
    headers: {
      'x-ratelimit-limit': '10', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(dayFrees), 'ratelimit-policy': `"minute";q=10;w=60, "day";q=10;w=86400, "month";q=10;w=${MARCH_SECONDS}`,
      ratelimit: `"day";r=0;t=${dayFrees - unix('2030-03-31T23:52:00Z')}`, 'retry-after': String(dayFrees - unix('2030-03-31T23:52:00Z'))
    }
  }, 'day and month full: quota_exceeded, Retry-After until the day too admits one more')
  at('2030-04-01T00:01:00Z')
  t.match(await call(gw, DEMO_KEYS.pro), { status: 429, code: 'rate_limited', headers: { 'x-ratelimit-limit': '10', 'retry-after': String(dayFrees - unix('2030-04-01T00:01:00Z')), 'ratelimit-policy': `"minute";q=10;w=60, "day";q=10;w=86400, "month";q=10;w=${30 * 86_400}` } },
    'April: the quota renewed (April\'s w is 30 days), the day still full: rate_limited')

  const metrics = parseScrape((await scrape(gw.adminUrl)).text)
  t.equal(sampleValue(metrics, 'gateway_ratelimit_rejections_total', { plan: 'free', window: 'month' }), 42, 'quota refusals: window="month"')
  t.equal(sampleValue(metrics, 'gateway_ratelimit_rejections_total', { plan: 'pro', window: 'month' }), 1)
  t.equal(sampleValue(metrics, 'gateway_ratelimit_rejections_total', { plan: 'free', window: 'ban' }), 0)
  t.equal(sampleValue(metrics, 'gateway_bans_total', { plan: 'free' }), 0)
})

t.test('overage: allow admits past perMonth with X-Quota-Overage and counts it; the minute still blocks; the consumers near their month are counted', async (t) => {
  const { gw } = await meteredMonth(t)
  // meteredMonth sent business past its 20: 1 GET, 1 POST, 4 GETs on the 31st at 12:00, then one more the minute refused.
  const admin = await (await fetch(`${gw.adminUrl}/admin/consumers/demo-business`)).json() as { usage: { month: unknown } }
  t.same(admin.usage.month, { count: 30, limit: 20, remaining: 0, resetAt: '2030-04-01T00:00:00.000Z', overageAllowed: true, overage: 10, shadow: null })
  const headers = await call(gw, DEMO_KEYS.business)
  t.same(headers, {
    status: 200, code: undefined, message: undefined,
    headers: {
      'x-ratelimit-limit': '10', 'x-ratelimit-remaining': '9', 'x-ratelimit-reset': String(unix('2030-03-31T23:01:31Z')),
      'ratelimit-policy': `"minute";q=10;w=60, "day";q=20;w=86400, "month";q=20;w=${MARCH_SECONDS}`, ratelimit: '"minute";r=9;t=61', 'x-quota-overage': '11'
    }
  }, 'the month never binds a soft quota; X-Quota-Overage: the units over it this month, this one included')

  const metrics = parseScrape((await scrape(gw.adminUrl)).text)
  t.equal(sampleValue(metrics, 'gateway_quota_overage_total', { plan: 'business' }), 11, 'overage units: 1 + 5 + 4 + 1')
  t.equal(sampleValue(metrics, 'gateway_quota_overage_total', { plan: 'free' }), 0)
  t.equal(sampleValue(metrics, 'gateway_ratelimit_rejections_total', { plan: 'business', window: 'minute' }), 1, 'the one the minute refused')

  await gw.app.history.flush()
  const near = parseScrape((await scrape(gw.adminUrl)).text)
  t.equal(sampleValue(near, 'gateway_quota_consumers_near_limit', { plan: 'free' }), 1, 'demo-free: 20 of 20')
  t.equal(sampleValue(near, 'gateway_quota_consumers_near_limit', { plan: 'business' }), 1, 'demo-business: 31 of 20')
  t.equal(sampleValue(near, 'gateway_quota_consumers_near_limit', { plan: 'pro' }), 0)
  t.same(await (await fetch(`${gw.adminUrl}/admin/quotas/near-limit`)).json(), {
    scope: 'process',
    share: 0.9,
    decidedSince: '2030-03-31T22:00:30.000Z',
    consumers: [
      { consumerId: 'demo-business', plan: 'business', month: '2030-03', units: 31, perMonth: 20, share: 1.55, lastDecision: '2030-03-31T23:00:30.000Z' },
      { consumerId: 'demo-free', plan: 'free', month: '2030-03', units: 20, perMonth: 20, share: 1, lastDecision: '2030-03-31T23:00:00.000Z' }
    ]
  })
  const usage = await (await fetch(`${gw.adminUrl}/admin/consumers/demo-business/usage?from=2030-03-29&to=2030-03-31`)).json() as Record<string, unknown>
  t.same(usage.days, [
    { date: '2030-03-29', admitted: 10, units: 10, rejected: 0, total: 10, overage: 0 },
    { date: '2030-03-30', admitted: 10, units: 10, rejected: 0, total: 10, overage: 0 },
    { date: '2030-03-31', admitted: 7, units: 11, rejected: 1, total: 8, overage: 11 }
  ])
  t.same(usage.months, [{ month: '2030-03', units: 31, overage: 11 }])
  t.match(usage, { perMonth: 20, overageAllowed: true })
})
