// The limiter in the gateway over real HTTP, on the in-process store with a virtual clock: headers on
// every status, Remaining counting down, 429 rate_limited and key_banned with Retry-After, the
// binding window, the anonymous per-IP policy, the ban cache, and one consumer's credentials sharing windows.
import { createHash } from 'node:crypto'
import t, { type Test } from 'tap'
import type { LimiterStore } from '../../../src/gateway/limiter/store.js'
import { createMemoryStore } from '../../../src/gateway/limiter/memory/store.js'
import { startGateway, type StartGatewayOptions } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS, plansYaml, testConfig } from '../../helpers/config-fixture.js'
import { EVENT_TIMEOUT_MS, until } from '../../helpers/poll.js'

const T0 = Date.UTC(2030, 0, 1, 12)
const PLANS = plansYaml({ free: { perMinute: 5, perDay: 7 }, pro: { perMinute: 5, perDay: 1000 }, anonymous: { perMinute: 3, perDay: 300 }, ban: { threshold: 3, durationSeconds: 10, maxDurationSeconds: 25 } })
const PRO_POLICY = '"minute";q=5;w=60, "day";q=1000;w=86400'
const ANON_POLICY = '"minute";q=3;w=60, "day";q=300;w=86400'

interface Clock { now: number }

function counted (store: LimiterStore): { store: LimiterStore, calls: () => number } {
  let calls = 0
  return { store: { ...store, consume: async (...args) => { calls++; return await store.consume(...args) } }, calls: () => calls }
}

async function start (t: Test, extra: StartGatewayOptions = {}): Promise<{ url: string, clock: Clock, gw: Awaited<ReturnType<typeof startGateway>>, calls: () => number }> {
  const clock = { now: T0 }
  const { store, calls } = counted(createMemoryStore({ now: () => clock.now }))
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': PLANS }), limiter: { store }, now: () => clock.now, ...extra })
  return { url: gw.url, clock, gw, calls }
}

function limitHeaders (res: Response): Record<string, string | null> {
  return {
    limit: res.headers.get('x-ratelimit-limit'),
    remaining: res.headers.get('x-ratelimit-remaining'),
    reset: res.headers.get('x-ratelimit-reset'),
    policy: res.headers.get('ratelimit-policy'),
    ratelimit: res.headers.get('ratelimit')
  }
}

const RESET_61 = String(T0 / 1000 + 61)

function sha256 (text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

t.test('Remaining counts down by one, then 429 rate_limited with Retry-After', async (t) => {
  const { url } = await start(t)
  for (let left = 4; left >= 0; left--) {
    const res = await fetch(`${url}/v1/pets`, { headers: bearer(DEMO_KEYS.pro) })
    t.equal(res.status, 200)
    await res.arrayBuffer()
    t.same(limitHeaders(res), { limit: '5', remaining: String(left), reset: RESET_61, policy: PRO_POLICY, ratelimit: `"minute";r=${left};t=61` })
  }
  const res = await fetch(`${url}/v1/pets`, { headers: bearer(DEMO_KEYS.pro) })
  t.equal(res.status, 429)
  t.equal(res.headers.get('retry-after'), '61', 'with 1 s buckets a full current bucket frees in 61 s')
  t.same(limitHeaders(res), { limit: '5', remaining: '0', reset: RESET_61, policy: PRO_POLICY, ratelimit: '"minute";r=0;t=61' })
  t.same(await res.json(), { code: 'rate_limited', message: 'Rate limit exceeded for the minute window; retry after 61 s', status: 429 })
  t.ok(res.headers.get('x-request-id'))
})

t.test('rate-limit headers on every status of the public port', async (t) => {
  const { url, gw } = await start(t, { bodyLimit: 64 })
  const key = bearer(DEMO_KEYS.business)
  const cases: Array<[string, RequestInit, number]> = [
    ['/v1/pets', { headers: key }, 200],
    ['/v1/pets?limit=0', { headers: key }, 400],
    ['/v1/pets/999999', { headers: key }, 404],
    ['/v1/nowhere', { headers: key }, 404],
    ['/v1/pets', { method: 'DELETE', headers: key }, 405],
    ['/v1/pets', { method: 'POST', headers: { ...key, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'x'.repeat(200), categoryId: 1 }) }, 413],
    ['/v1/pets', { method: 'POST', headers: { ...key, 'content-type': 'text/plain' }, body: 'x' }, 415]
  ]
  const policy = '"minute";q=1000;w=60, "day";q=100000;w=86400'
  let left = 1000
  for (const [path, init, status] of cases) {
    const res = await fetch(url + path, init)
    await res.arrayBuffer()
    t.equal(res.status, status, `${init.method ?? 'GET'} ${path}`)
    left--
    t.same(limitHeaders(res), { limit: '1000', remaining: String(left), reset: RESET_61, policy, ratelimit: `"minute";r=${left};t=61` }, `headers on ${status}`)
  }
  const anon = await fetch(`${url}/v1/pets`)
  t.equal(anon.status, 401)
  await anon.arrayBuffer()
  t.same(limitHeaders(anon), { limit: '3', remaining: '2', reset: RESET_61, policy: ANON_POLICY, ratelimit: '"minute";r=2;t=61' }, 'a 401 carries the anonymous policy')

  await gw.backend?.close()
  const down = await fetch(`${url}/v1/pets`, { headers: bearer(DEMO_KEYS.business) })
  await down.arrayBuffer()
  t.equal(down.status, 502)
  t.equal(down.headers.get('x-ratelimit-remaining'), String(left - 1), 'a 502 carries them too')
})

t.test('the binding window is the one with fewest remaining', async (t) => {
  const { url, clock } = await start(t)
  for (let i = 0; i < 5; i++) await (await fetch(`${url}/v1/pets`, { headers: bearer(DEMO_KEYS.free) })).arrayBuffer()
  clock.now += 61_000
  const res = await fetch(`${url}/v1/pets`, { headers: bearer(DEMO_KEYS.free) })
  await res.arrayBuffer()
  t.equal(res.status, 200)
  t.same(limitHeaders(res), {
    limit: '7',
    remaining: '1',
    reset: String(T0 / 1000 + 97 * 900),
    policy: '"minute";q=5;w=60, "day";q=7;w=86400',
    ratelimit: `"day";r=1;t=${97 * 900 - 61}`
  })
  await (await fetch(`${url}/v1/pets`, { headers: bearer(DEMO_KEYS.free) })).arrayBuffer()
  const over = await fetch(`${url}/v1/pets`, { headers: bearer(DEMO_KEYS.free) })
  t.equal(over.status, 429)
  t.equal(over.headers.get('retry-after'), String(97 * 900 - 61), 'waits for the day window')
  t.match(await over.json(), { code: 'rate_limited', message: /day window/ })
})

t.test('anonymous requests are limited per client IP, honouring the trusted proxy setting', async (t) => {
  const { url } = await start(t, { trustProxy: true })
  const from = (ip: string): RequestInit => ({ headers: { 'x-forwarded-for': ip } })
  const statuses: number[] = []
  for (let i = 0; i < 4; i++) {
    const res = await fetch(`${url}/v1/pets`, from('203.0.113.7'))
    statuses.push(res.status)
    await res.arrayBuffer()
  }
  t.same(statuses, [401, 401, 401, 429], 'the limiter answers before the 401')
  const other = await fetch(`${url}/v1/pets`, from('203.0.113.8'))
  t.equal(other.status, 401)
  t.equal(other.headers.get('x-ratelimit-remaining'), '2', 'another client IP has its own window')
  await other.arrayBuffer()
  const bad = await fetch(`${url}/v1/pets`, { headers: { ...bearer('psk_nope'), 'x-forwarded-for': '203.0.113.7' } })
  t.equal(bad.status, 429, 'an invalid key counts against the IP too')
  await bad.arrayBuffer()
})

t.test('an anonymous flood far over its limit is refused, never banned: the plugin passes no ban policy for client addresses', async (t) => {
  const { url, gw, calls } = await start(t, { trustProxy: true })
  const statuses: string[] = []
  for (let i = 0; i < 40; i++) {
    const res = await fetch(`${url}/v1/pets`, { headers: { 'x-forwarded-for': '198.51.100.9' } })
    const body = await res.json() as { code?: string }
    statuses.push(res.status === 429 ? `429 ${body.code ?? ''}` : String(res.status))
  }
  t.same(statuses.slice(0, 3), ['401', '401', '401'], 'the anonymous limit (3 a minute) admits three')
  t.same(new Set(statuses.slice(3)), new Set(['429 rate_limited']), '37 over the limit, 34 beyond the ban threshold: every one rate_limited, none key_banned')
  t.equal(calls(), 40, 'each decided by the store (no ban cached)')
  t.same(await gw.app.limiter.listBans(), [], 'no ban in the store')
})

t.test('ban: the crossing 429 is key_banned, the flood is answered from the cache, lift clears it', async (t) => {
  const { url, clock, gw, calls } = await start(t)
  const get = async (): Promise<Response> => {
    const res = await fetch(`${url}/v1/pets`, { headers: bearer(DEMO_KEYS.pro) })
    await res.clone().arrayBuffer()
    return res
  }
  for (let i = 0; i < 5; i++) await get()
  const statuses: number[] = []
  for (let i = 0; i < 3; i++) statuses.push((await get()).status)
  t.same(statuses, [429, 429, 429])
  const crossing = await get()
  t.equal(crossing.status, 429)
  t.equal(crossing.headers.get('retry-after'), '10')
  t.same(await crossing.json(), { code: 'key_banned', message: 'API key is temporarily banned for continuing after 429s; retry after 10 s', status: 429 })
  t.same(limitHeaders(crossing), { limit: '5', remaining: '0', reset: String(T0 / 1000 + 10), policy: PRO_POLICY, ratelimit: '"minute";r=0;t=10' })

  const before = calls()
  clock.now += 3_000
  for (let i = 0; i < 20; i++) {
    const res = await get()
    t.equal(res.status, 429)
    t.equal(res.headers.get('retry-after'), '7')
  }
  t.equal(calls(), before, 'a banned flood never reaches the store')
  t.same((await gw.app.limiter.listBans()).map((b) => b.id), ['demo-pro'])
  t.ok(await until('the ban counted', () => gw.app.limiterStatus.bannedKeys() === 1, EVENT_TIMEOUT_MS), 'counted for gateway_banned_keys')
  t.equal(await gw.app.limiter.liftBan('demo-pro'), true)
  t.same(await gw.app.limiter.listBans(), [])
  t.ok(await until('the lift counted', () => gw.app.limiterStatus.bannedKeys() === 0, EVENT_TIMEOUT_MS), 'the count follows the lift')
  const lifted = await get()
  t.equal(lifted.status, 429)
  t.match(await lifted.json(), { code: 'rate_limited' }, 'lifted: over the minute limit, no longer banned')
  clock.now += 61_000
  t.equal((await get()).status, 200)
})

t.test('credentials of one consumer share its windows and its ban', async (t) => {
  const keys = { a: `psk_test_acme_a_${'a'.repeat(30)}`, b: `psk_test_acme_b_${'b'.repeat(30)}`, other: `psk_test_other_${'c'.repeat(30)}` }
  const keysYaml = ['keys:',
    `  - { id: acme-ci, consumer: acme, sha256: ${sha256(keys.a)}, plan: pro }`,
    `  - { id: acme-prod, consumer: acme, sha256: ${sha256(keys.b)}, plan: pro }`,
    `  - { id: other, sha256: ${sha256(keys.other)}, plan: pro }`, ''].join('\n')
  const clock = { now: T0 }
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': PLANS, 'keys.yaml': keysYaml }), limiter: { store: createMemoryStore({ now: () => clock.now }) }, now: () => clock.now })
  const get = async (key: string): Promise<Response> => {
    const res = await fetch(`${gw.url}/v1/pets`, { headers: bearer(key) })
    await res.clone().arrayBuffer()
    return res
  }
  const remaining: string[] = []
  for (const key of [keys.a, keys.b, keys.a, keys.b, keys.a]) remaining.push((await get(key)).headers.get('x-ratelimit-remaining') ?? '')
  t.same(remaining, ['4', '3', '2', '1', '0'], 'both credentials count down one window')
  t.equal((await get(keys.b)).status, 429, 'the second credential is limited by the first one\'s use')
  t.equal((await get(keys.other)).status, 200, 'another consumer has its own window')
  for (let i = 0; i < 2; i++) await get(keys.a)
  const crossing = await get(keys.b)
  t.match(await crossing.json(), { code: 'key_banned' }, 'the 429s of both credentials count towards one ban')
  t.same((await gw.app.limiter.listBans()).map((b) => b.id), ['acme'], 'the ban is the consumer\'s')
  t.match(await (await get(keys.a)).json(), { code: 'key_banned' }, 'and holds for its other credential, from the ban cache')
  await gw.app.limiter.reset('acme')
  t.equal((await get(keys.a)).status, 200, 'reset: a clean slate for the consumer')
})
