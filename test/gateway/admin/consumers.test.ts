// GET /admin/consumers/:id and POST /admin/consumers/:id/reset against real gateways: the shape
// (never a digest), credential ids resolving to their consumer, and a reset that really clears a
// banned consumer — on the in-process store and on a real Redis shared by two gateways.
import t, { type Test } from 'tap'
import { keyDigest } from '../../../src/gateway/auth/bearer.js'
import { startGateway, type StartedGateway } from '../../helpers/gateway.js'
import { ADMIN_JSON, bearer, DEMO_KEYS, plansYaml, testConfig } from '../../helpers/config-fixture.js'
import { startRedis } from '../../helpers/redis.js'

const NOW = Date.parse('2030-01-10T12:00:00Z')
const ACME_OLD = 'psk_acme_old_key_for_consumer_tests_0001'
const ACME_NEW = 'psk_acme_new_key_for_consumer_tests_0002'

/** Consumer `acme` (pro) with two credentials — the old read/write one expiring in 3 days, a newer read-only one — and the demo keys. */
function keysYaml (): string {
  return [
    'keys:',
    `  - { id: demo-free, sha256: ${keyDigest(DEMO_KEYS.free)}, plan: free }`,
    `  - { id: acme, sha256: ${keyDigest(ACME_OLD)}, plan: pro, expiresAt: "2030-01-13T12:00:00Z" }`,
    `  - { id: acme-2030, sha256: ${keyDigest(ACME_NEW)}, consumer: acme, plan: pro, scopes: [read] }`,
    `  - { id: gone, sha256: ${'c'.repeat(64)}, plan: free, expiresAt: "2030-01-01" }`,
    ''
  ].join('\n')
}

async function call (url: string, init: RequestInit = {}): Promise<{ status: number, body: Record<string, unknown>, text: string }> {
  const res = await fetch(url, init)
  const text = await res.text()
  return { status: res.status, body: JSON.parse(text) as Record<string, unknown>, text }
}

async function codes (gw: StartedGateway, key: string, n: number): Promise<string[]> {
  const out: string[] = []
  for (let i = 0; i < n; i++) {
    const res = await fetch(`${gw.url}/v1/store/orders`, { headers: bearer(key) })
    out.push(res.status === 200 ? 'ok' : ((await res.json()) as { code: string }).code)
    if (res.status === 200) await res.arrayBuffer()
  }
  return out
}

t.test('GET /admin/consumers/:id: plan, credentials, usage and ban state, never a digest', async (t) => {
  const gw = await startGateway(t, { config: testConfig({ 'keys.yaml': keysYaml() }), now: () => NOW })
  for (const key of [ACME_OLD, ACME_NEW, ACME_OLD]) {
    const res = await fetch(`${gw.url}/v1/store/orders`, { headers: bearer(key) })
    t.equal(res.status, 200)
    await res.arrayBuffer()
  }
  const { status, body, text } = await call(`${gw.adminUrl}/admin/consumers/acme`)
  t.equal(status, 200)
  t.notMatch(text, /[0-9a-f]{64}/, 'no digest anywhere in the body')
  t.notMatch(text, /sha256/)
  t.match(body, {
    consumerId: 'acme',
    plan: 'pro',
    limits: { perMinute: 300, perDay: 10000 },
    usage: { minute: { count: 3, limit: 300, remaining: 297 }, day: { count: 3, limit: 10000, remaining: 9997 } },
    ban: { until: null, secondsLeft: 0, escalationLevel: null }
  })
  t.same(body.credentials, [
    { id: 'acme', scopes: ['read', 'write'], expiresAt: '2030-01-13T12:00:00.000Z', expired: false, disabled: false },
    { id: 'acme-2030', scopes: ['read'], expiresAt: null, expired: false, disabled: false }
  ], 'both credentials, counted together')

  const byCredential = await call(`${gw.adminUrl}/admin/consumers/acme-2030`)
  t.equal(byCredential.body.consumerId, 'acme', 'a credential id resolves to its consumer')
  const usage = await call(`${gw.adminUrl}/admin/keys/acme-2030/usage`)
  t.match(usage.body, { keyId: 'acme-2030', consumerId: 'acme', minute: { count: 3 } }, 'the old usage route answers for the consumer')

  const gone = await call(`${gw.adminUrl}/admin/consumers/gone`)
  t.match(gone.body, { credentials: [{ id: 'gone', expired: true }] }, 'expired by the gateway clock')

  const unknown = await call(`${gw.adminUrl}/admin/consumers/nobody`)
  t.equal(unknown.status, 404)
  t.same(unknown.body, { code: 'not_found', message: 'No consumer or key with id nobody', status: 404 })
  const bad = await call(`${gw.adminUrl}/admin/consumers/${encodeURIComponent('../x')}`)
  t.equal(bad.status, 400)
  t.equal(bad.body.status, 400)
})

async function bannedThenReset (t: Test, gw: StartedGateway, others: StartedGateway[], who: string, headers: Record<string, string> = {}): Promise<void> {
  t.same(await codes(gw, DEMO_KEYS.free, 3), ['ok', 'rate_limited', 'key_banned'])
  for (const other of others) t.same(await codes(other, DEMO_KEYS.free, 1), ['key_banned'], 'the other gateway has cached the ban')

  const before = await call(`${gw.adminUrl}/admin/consumers/demo-free`, { headers })
  t.match(before.body, { usage: { minute: { count: 1, remaining: 0 } }, ban: { escalationLevel: 0 } })
  const ban = before.body.ban as { until: string, secondsLeft: number }
  t.ok(ban.secondsLeft > 890 && ban.secondsLeft <= 900, `${ban.secondsLeft} s left`)

  const reset = await call(`${gw.adminUrl}/admin/consumers/demo-free/reset`, { method: 'POST', headers: { ...headers, ...ADMIN_JSON } })
  t.equal(reset.status, 200)
  t.match(reset.body, { consumerId: 'demo-free', reset: true, cleared: { minute: 1, day: 1, ban: { until: ban.until, escalationLevel: 0 } } })

  const after = await call(`${gw.adminUrl}/admin/consumers/demo-free`, { headers })
  t.match(after.body, { usage: { minute: { count: 0, remaining: 1 }, day: { count: 0 } }, ban: { until: null, secondsLeft: 0, escalationLevel: null } })
  t.same(await codes(gw, DEMO_KEYS.free, 1), ['ok'], 'banned → reset → 200 again')
  for (const other of others) t.same(await codes(other, DEMO_KEYS.free, 1), ['rate_limited'], 'the other gateway dropped its cached ban and sees the shared window')

  const audit = gw.logs.filter((l) => l.msg === 'consumer reset')
  t.equal(audit.length, 1, 'one audit line')
  t.match(audit[0], { level: 30, audit: true, consumerId: 'demo-free', who, client: '127.0.0.1', cleared: { minute: 1, day: 1 } })
  t.match(audit[0]?.at, /^\d{4}-\d\d-\d\dT[\d:.]+Z$/)
  t.notMatch(gw.rawLogs(), /[0-9a-f]{64}/, 'no digest in the logs')
}

const banPlans = plansYaml({ free: { perMinute: 1, perDay: 100 }, ban: { threshold: 1 } })

t.test('POST /admin/consumers/:id/reset clears a banned consumer on the in-process store', async (t) => {
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': banPlans }) })
  await bannedThenReset(t, gw, [], 'loopback')
  const unknown = await call(`${gw.adminUrl}/admin/consumers/nobody/reset`, { method: 'POST', headers: ADMIN_JSON })
  t.equal(unknown.status, 404)
  t.equal(unknown.body.code, 'not_found')
})

t.test('POST /admin/consumers/:id/reset on real Redis clears every key and every gateway\'s ban cache', async (t) => {
  const redis = await startRedis(t)
  const config = testConfig({ 'plans.yaml': banPlans })
  const limiter = { settings: { redisUrl: redis.url } }
  const gw = await startGateway(t, { config, limiter, adminToken: 'tok-1' })
  const other = await startGateway(t, { config, limiter })
  await bannedThenReset(t, gw, [other], 'admin-token', { authorization: 'Bearer tok-1' })
  t.same(await codes(gw, DEMO_KEYS.free, 1), ['key_banned'], 'a second 429 bans again…')
  const again = await call(`${gw.adminUrl}/admin/consumers/demo-free`, { headers: { authorization: 'Bearer tok-1' } })
  t.match(again.body, { ban: { escalationLevel: 0 } }, '…at the base duration: the reset forgot the escalation')
  t.ok((again.body.ban as { secondsLeft: number }).secondsLeft > 890)
  await call(`${gw.adminUrl}/admin/consumers/demo-free/reset`, { method: 'POST', headers: { authorization: 'Bearer tok-1', ...ADMIN_JSON } })
  // The limiter's keys (its state and its day buckets) are gone; the usage history (`rl:{demo-free}:u:YYYYMM`) is a
  // record a reset keeps, and the history plugin's flush (every 5 s) writes it whenever a run lasts that long.
  const left = (await redis.cli('--scan', '--pattern', 'rl:{demo-free}*')).split('\n').filter((key) => key !== '')
  t.comment(`keys of the consumer after the reset: ${JSON.stringify(left)}`)
  t.same(left.filter((key) => !/^rl:\{demo-free\}:u:\d{6}$/.test(key)), [], 'no limiter key of the consumer is left (rl:{demo-free}, rl:{demo-free}:d)')
  const refused = await fetch(`${gw.adminUrl}/admin/consumers/demo-free/reset`, { method: 'POST' })
  t.equal(refused.status, 401, 'the admin token guards it')
  await refused.arrayBuffer()
})

t.test('a limiter store that does not answer makes the consumer routes 503 unavailable, not 500', async (t) => {
  const redis = await startRedis(t)
  const gw = await startGateway(t, { limiter: { settings: { redisUrl: redis.url } } })
  await redis.stop()
  for (const [method, path] of [['GET', '/admin/consumers/demo-pro'], ['POST', '/admin/consumers/demo-pro/reset']] as const) {
    const res = await call(`${gw.adminUrl}${path}`, { method, headers: ADMIN_JSON })
    t.equal(res.status, 503, `${method} ${path}`)
    t.same(res.body, { code: 'unavailable', message: 'The limiter store did not answer; try again', status: 503 })
  }
  t.equal(gw.logs.filter((l) => l.msg === 'consumer reset').length, 0, 'no audit line for a reset that did not happen')
})
