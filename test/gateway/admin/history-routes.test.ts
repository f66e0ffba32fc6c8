// The history's admin API on a gateway with the in-process store and an injected clock: usage per
// UTC day across midnight (each decision filed under the day of its own `now`), one history for a
// consumer's two credentials (a rotation does not split it), `scope: "process"`, the 400s of a bad
// range, and the consumers a plan's shadow limits would have rejected in the last 24 h.
import t from 'tap'
import { keyDigest } from '../../../src/gateway/auth/bearer.js'
import { startGateway, type StartedGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS, plansYaml, testConfig } from '../../helpers/config-fixture.js'

const OLD_KEY = 'psk_history_old_0123456789abcdefABCD'
const NEW_KEY = 'psk_history_new_0123456789abcdefABCD'
/** One consumer, two credentials: what `keys rotate` leaves while the old key's grace runs. */
const ROTATED_KEYS = [
  'keys:',
  `  - { id: acme-1, consumer: acme, sha256: ${keyDigest(OLD_KEY)}, plan: free }`,
  `  - { id: acme-2, consumer: acme, sha256: ${keyDigest(NEW_KEY)}, plan: free }`,
  '  - { id: demo-free, sha256: d14d802016ff49cf9eba6302dd9baad9ac142c1ddbd39dc1e0927dbe6d77ff48, plan: free }',
  '  - { id: demo-pro, sha256: e7daab8507f58ed6078e7ec8fd803e8ee58af24cfc496e8e7476d78b7194e0c8, plan: pro }',
  ''
].join('\n')

async function send (gw: StartedGateway, key: string, n: number): Promise<number[]> {
  const statuses: number[] = []
  for (let i = 0; i < n; i++) {
    const res = await fetch(`${gw.url}/v1/pets?limit=1`, { headers: bearer(key) })
    await res.arrayBuffer()
    statuses.push(res.status)
  }
  return statuses
}

async function admin (gw: StartedGateway, path: string): Promise<{ status: number, body: Record<string, unknown> }> {
  const res = await fetch(`${gw.adminUrl}${path}`)
  return { status: res.status, body: await res.json() as Record<string, unknown> }
}

t.test('usage per UTC day across midnight, shared by a consumer\'s credentials, per process on the in-process store', async (t) => {
  let clock = Date.UTC(2030, 0, 31, 23, 59, 50)
  const config = testConfig({ 'plans.yaml': plansYaml({ free: { perMinute: 3, perDay: 1000 } }), 'keys.yaml': ROTATED_KEYS })
  const gw = await startGateway(t, { config, now: () => clock })

  t.same(await send(gw, OLD_KEY, 4), [200, 200, 200, 429], 'Jan 31: 3 admitted, 1 rejected')
  clock = Date.UTC(2030, 1, 1, 0, 1, 0)
  t.same(await send(gw, NEW_KEY, 2), [200, 200], 'Feb 1, with the rotated key')

  const usage = await admin(gw, '/admin/consumers/acme/usage?from=2030-01-30&to=2030-02-01')
  t.equal(usage.status, 200)
  t.same(usage.body, {
    consumerId: 'acme',
    plan: 'free',
    scope: 'process',
    counts: 'this gateway process only, since it started (in-process limiter store)',
    from: '2030-01-30',
    to: '2030-02-01',
    days: [
      { date: '2030-01-30', admitted: 0, units: 0, rejected: 0, total: 0, overage: 0 },
      { date: '2030-01-31', admitted: 3, units: 3, rejected: 1, total: 4, overage: 0 },
      { date: '2030-02-01', admitted: 2, units: 2, rejected: 0, total: 2, overage: 0 }
    ],
    total: { admitted: 5, units: 5, rejected: 1, total: 6, overage: 0 },
    months: [{ month: '2030-01', units: 3, overage: 0 }, { month: '2030-02', units: 2, overage: 0 }],
    perMonth: null,
    overageAllowed: false
  })
  const byCredential = await admin(gw, '/admin/consumers/acme-1/usage?from=2030-01-30&to=2030-02-01')
  t.same(byCredential.body.days, usage.body.days, 'a credential id names its consumer\'s one history')

  const defaults = await admin(gw, '/admin/consumers/acme/usage')
  t.match(defaults.body, { from: '2029-12-29', to: '2030-02-01' }, 'default: the last 35 days up to the gateway\'s today')
  t.equal((defaults.body.days as unknown[]).length, 35)
  const pro = await admin(gw, '/admin/consumers/demo-pro/usage?from=2030-02-01&to=2030-02-01')
  t.same(pro.body.total, { admitted: 0, units: 0, rejected: 0, total: 0, overage: 0 }, 'another consumer\'s history is its own')
})

t.test('a bad range is a 400 that says what is wrong; an unknown consumer or plan is a 404', async (t) => {
  const clock = Date.UTC(2030, 1, 10, 12)
  const gw = await startGateway(t, { now: () => clock })
  const cases: Array<[string, number, string]> = [
    ['/admin/consumers/demo-free/usage?from=2030-02-30', 400, 'from must be a UTC date YYYY-MM-DD, got "2030-02-30"'],
    ['/admin/consumers/demo-free/usage?to=10-02-2030', 400, 'to must be a UTC date YYYY-MM-DD, got "10-02-2030"'],
    ['/admin/consumers/demo-free/usage?from=2030-02-09&to=2030-02-08', 400, 'from (2030-02-09) is after to (2030-02-08)'],
    ['/admin/consumers/demo-free/usage?to=2030-02-11', 400, 'to (2030-02-11) is after today (2030-02-10, UTC)'],
    ['/admin/consumers/demo-free/usage?from=2030-01-06', 400, 'the usage history keeps the last 35 days: from must be 2030-01-07 or later, got 2030-01-06'],
    ['/admin/consumers/nobody/usage', 404, 'No consumer or key with id nobody'],
    ['/admin/plans/gold/shadow', 404, 'No plan named gold (known: free, pro, business, enterprise)'],
    ['/admin/plans/free/shadow?top=0', 400, 'querystring/top must be >= 1']
  ]
  for (const [path, status, message] of cases) {
    const res = await admin(gw, path)
    t.equal(res.status, status, path)
    t.match(res.body, { code: status === 400 ? 'invalid_parameter' : 'not_found', message, status }, path)
  }
  t.equal((await admin(gw, '/admin/consumers/demo-free/usage?from=2030-01-07')).status, 200, 'the oldest day kept is accepted')
})

t.test('GET /admin/plans/:plan/shadow: exactly the consumers over the shadow limit, with counts, first and last, top N', async (t) => {
  let clock = Date.UTC(2030, 2, 1, 10)
  const plans = plansYaml().replace('free: { perMinute: 60, perDay: 1000 }', 'free: { perMinute: 60, perDay: 1000, shadow: { perMinute: 2 } }')
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': plans, 'keys.yaml': ROTATED_KEYS }), now: () => clock })
  const firstAt = clock
  t.same(await send(gw, OLD_KEY, 3), [200, 200, 200])
  clock += 1_000
  t.same(await send(gw, NEW_KEY, 3), [200, 200, 200], 'acme: 6 requests in the minute, the last 4 over shadow 2')
  const lastAt = clock
  t.same(await send(gw, DEMO_KEYS.free, 2), [200, 200], 'demo-free: 2, at the shadow limit, never over it')

  const res = await admin(gw, '/admin/plans/free/shadow')
  t.equal(res.status, 200)
  t.same(res.body, {
    plan: 'free',
    limits: { perMinute: 60, perDay: 1000, shadow: { perMinute: 2, announce: false } },
    shadow: { perMinute: 2, announce: false },
    scope: 'process',
    counts: 'this gateway process only, since it started (in-process limiter store)',
    since: '2030-02-28T10:00:00.000Z',
    until: new Date(clock).toISOString(),
    consumers: 1,
    rejections: 4,
    complete: true,
    untracked: 0,
    top: [{ consumerId: 'acme', rejections: 4, admitted: 4, first: new Date(firstAt).toISOString(), last: new Date(lastAt).toISOString() }]
  })
  t.same((await admin(gw, '/admin/plans/pro/shadow')).body.top, [], 'a plan without a shadow lists no one')

  // 25 h later, those hours are out of the window.
  clock += 25 * 3_600_000
  t.same((await admin(gw, '/admin/plans/free/shadow')).body.consumers, 0, 'only the last 24 h count')
})
