import t, { type Test } from 'tap'
import { DOCS_LINK } from '../../../src/interface/errors.js'
import { createConfigHolder } from '../../../src/gateway/config/plugin.js'
import { startEchoUpstream } from '../../helpers/echo-upstream.js'
import { startGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS, testConfig } from '../../helpers/config-fixture.js'

const SINCE_SECONDS = Date.UTC(2026, 10, 21) / 1000
const SUNSET_MS = Date.UTC(2030, 11, 5)
const BEFORE_SUNSET = SUNSET_MS - 1
const SUCCESSOR_LINK = '</v1/pets>; rel="successor-version"'
const PRO = bearer(DEMO_KEYS.pro)

function lifecycleHeaders (res: Response): Record<string, string | null> {
  return {
    deprecation: res.headers.get('deprecation'),
    sunset: res.headers.get('sunset'),
    link: res.headers.get('link'),
    'x-api-stability': res.headers.get('x-api-stability')
  }
}

const GET_PET_HEADERS = {
  deprecation: `@${SINCE_SECONDS}`,
  sunset: 'Thu, 05 Dec 2030 00:00:00 GMT',
  link: SUCCESSOR_LINK,
  'x-api-stability': null
}
const NO_LIFECYCLE_HEADERS = { deprecation: null, sunset: null, link: null, 'x-api-stability': null }

async function createPet (t: Test, url: string, name: string): Promise<{ id: number }> {
  const res = await fetch(`${url}/v1/pets`, {
    method: 'POST',
    headers: { ...PRO, 'content-type': 'application/json' },
    body: JSON.stringify({ name, categoryId: 1 })
  })
  t.equal(res.status, 201)
  return await res.json() as { id: number }
}

t.test('GET /v1/pets/{petId} before its sunset: Deprecation, Sunset and the successor Link, on 200 and 404', async (t) => {
  const gw = await startGateway(t, { now: () => BEFORE_SUNSET })
  const pet = await createPet(t, gw.url, 'Rex')

  const found = await fetch(`${gw.url}/v1/pets/${pet.id}`, { headers: PRO })
  t.equal(found.status, 200)
  t.same(lifecycleHeaders(found), GET_PET_HEADERS)
  t.same(await found.json(), { id: pet.id, name: 'Rex', categoryId: 1, status: 'available' })

  const missing = await fetch(`${gw.url}/v1/pets/999999`, { headers: PRO })
  t.equal(missing.status, 404)
  t.same(lifecycleHeaders(missing), GET_PET_HEADERS)
  t.equal((await missing.json() as { code: string }).code, 'not_found')
})

t.test('at and after the sunset instant: 410 endpoint_removed with the same headers, backend never called', async (t) => {
  const upstream = await startEchoUpstream(t)
  let now = BEFORE_SUNSET
  const gw = await startGateway(t, { backendUrl: upstream.url, now: () => now })

  const before = await fetch(`${gw.url}/v1/pets/7`, { headers: PRO })
  t.equal(before.status, 200)
  await before.arrayBuffer()
  t.equal(upstream.received.length, 1)

  for (const at of [SUNSET_MS, SUNSET_MS + 86_400_000 * 365]) {
    now = at
    for (const method of ['GET', 'HEAD']) {
      const res = await fetch(`${gw.url}/v1/pets/7`, { method, headers: PRO })
      t.equal(res.status, 410, `${method} at ${new Date(at).toISOString()}`)
      t.same(lifecycleHeaders(res), GET_PET_HEADERS)
      t.equal(res.headers.get('content-type'), 'application/json; charset=utf-8')
      t.match(res.headers.get('x-request-id'), /^[0-9a-f-]{36}$/)
      if (method === 'GET') {
        t.same(await res.json(), {
          code: 'endpoint_removed',
          message: 'GET /v1/pets/:petId was removed at its sunset date; use /v1/pets',
          status: 410
        })
      }
    }
  }
  t.equal(upstream.received.length, 1, 'no 410 reached the backend')

  const list = await fetch(`${gw.url}/v1/pets`, { headers: PRO })
  t.equal(list.status, 200, 'other routes are unaffected by the sunset')
  t.same(lifecycleHeaders(list), NO_LIFECYCLE_HEADERS)
  await list.arrayBuffer()
})

t.test('pipeline order: no key is 401 (not 410) and carries no lifecycle headers; a wrong method is 405', async (t) => {
  const upstream = await startEchoUpstream(t)
  const gw = await startGateway(t, { backendUrl: upstream.url, now: () => SUNSET_MS })

  const anonymous = await fetch(`${gw.url}/v1/pets/1`)
  t.equal(anonymous.status, 401)
  // Its only Link is the pointer to the documentation every keyless 401 carries, not the successor.
  t.same(lifecycleHeaders(anonymous), { ...NO_LIFECYCLE_HEADERS, link: DOCS_LINK })
  t.equal((await anonymous.json() as { code: string }).code, 'unauthorized')

  const wrongMethod = await fetch(`${gw.url}/v1/pets/1`, { method: 'DELETE', headers: PRO })
  t.equal(wrongMethod.status, 405)
  t.same(lifecycleHeaders(wrongMethod), NO_LIFECYCLE_HEADERS)
  t.same(await wrongMethod.json(), { code: 'method_not_allowed', message: 'Method DELETE is not allowed on /v1/pets/:petId', status: 405 })
  t.equal(upstream.received.length, 0)
})

t.test('X-API-Stability: GET /v1/store/orders is experimental in the shipped config; unmarked routes have none', async (t) => {
  const gw = await startGateway(t, { now: () => BEFORE_SUNSET })
  const orders = await fetch(`${gw.url}/v1/store/orders`, { headers: PRO })
  t.equal(orders.status, 200)
  t.same(lifecycleHeaders(orders), { ...NO_LIFECYCLE_HEADERS, 'x-api-stability': 'experimental' })
  t.same(await orders.json(), [])

  const pets = await fetch(`${gw.url}/v1/pets`, { headers: PRO })
  t.equal(pets.status, 200)
  t.same(lifecycleHeaders(pets), NO_LIFECYCLE_HEADERS)
  await pets.arrayBuffer()
})

const LIST_DEPRECATED_ROUTES = `routes:
  - { method: GET, path: /v1/pets, stability: beta,
      deprecated: { since: 2025-01-01, sunset: 2031-06-30, successor: /v2/pets } }
`

t.test('rules come from routes.yaml: a backend Link (rel="next") and the successor Link are merged, not overwritten', async (t) => {
  const gw = await startGateway(t, { config: testConfig({ 'routes.yaml': LIST_DEPRECATED_ROUTES }), now: () => BEFORE_SUNSET })
  await createPet(t, gw.url, 'A')
  await createPet(t, gw.url, 'B')

  const page = await fetch(`${gw.url}/v1/pets?limit=1`, { headers: PRO })
  t.equal(page.status, 200)
  const link = page.headers.get('link') ?? ''
  t.match(link, /^<\/v1\/pets\?cursor=[^>]+&limit=1>; rel="next", <\/v2\/pets>; rel="successor-version"$/)
  t.equal(page.headers.get('deprecation'), `@${Date.UTC(2025, 0, 1) / 1000}`)
  t.equal(page.headers.get('sunset'), 'Mon, 30 Jun 2031 00:00:00 GMT')
  t.equal(page.headers.get('x-api-stability'), 'beta')
  t.equal((await page.json() as unknown[]).length, 1)

  const getPet = await fetch(`${gw.url}/v1/pets/1`, { headers: PRO })
  t.equal(getPet.status, 200)
  t.same(lifecycleHeaders(getPet), NO_LIFECYCLE_HEADERS, 'GET /v1/pets/:petId is not deprecated in this config')
  await getPet.arrayBuffer()
})

t.test('a config swap (reload) changes the lifecycle of the next request', async (t) => {
  const holder = createConfigHolder(testConfig())
  const gw = await startGateway(t, { config: holder, now: () => BEFORE_SUNSET })
  const before = await fetch(`${gw.url}/v1/store/orders`, { headers: PRO })
  t.equal(before.headers.get('x-api-stability'), 'experimental')
  await before.arrayBuffer()

  holder.swap(testConfig({ 'routes.yaml': 'routes:\n  - { method: GET, path: /v1/store/orders, stability: beta }\n' }))
  const after = await fetch(`${gw.url}/v1/store/orders`, { headers: PRO })
  t.equal(after.headers.get('x-api-stability'), 'beta')
  await after.arrayBuffer()
  const pet = await fetch(`${gw.url}/v1/pets/1`, { headers: PRO })
  t.same(lifecycleHeaders(pet), NO_LIFECYCLE_HEADERS)
  await pet.arrayBuffer()
})

t.test('a deprecated call is logged with the key id on its one request line, and counted by route and plan', async (t) => {
  const gw = await startGateway(t, { now: () => BEFORE_SUNSET })
  for (const key of [DEMO_KEYS.pro, DEMO_KEYS.pro, DEMO_KEYS.free]) {
    const res = await fetch(`${gw.url}/v1/pets/1`, { headers: bearer(key) })
    await res.arrayBuffer()
  }
  const orders = await fetch(`${gw.url}/v1/store/orders`, { headers: PRO })
  await orders.arrayBuffer()

  const lines = gw.logs.filter((l) => l.msg === 'request')
  t.equal(lines.length, 4)
  t.match(lines.slice(0, 3), [
    { keyId: 'demo-pro', plan: 'pro', route: '/v1/pets/:petId', status: 404, deprecated: true },
    { keyId: 'demo-pro', plan: 'pro', route: '/v1/pets/:petId', status: 404, deprecated: true },
    { keyId: 'demo-free', plan: 'free', route: '/v1/pets/:petId', status: 404, deprecated: true }
  ])
  t.notOk('deprecated' in (lines[3] ?? {}), 'a route that is only marked experimental is not deprecated')

  const scrape = await (await fetch(`${gw.adminUrl}/metrics`)).text()
  t.match(scrape, '\ngateway_deprecated_requests_total{route="/v1/pets/:petId",plan="pro"} 2\n')
  t.match(scrape, '\ngateway_deprecated_requests_total{route="/v1/pets/:petId",plan="free"} 1\n')
  t.match(scrape, '\ngateway_deprecated_requests_total{route="/v1/pets/:petId",plan="business"} 0\n')
})

t.test('start-up logs the lifecycle rules once, and warns about a rule for a route the gateway does not serve', async (t) => {
  const gw = await startGateway(t, {
    config: testConfig({ 'routes.yaml': 'routes:\n  - { method: GET, path: /v1/pets/:petId, deprecated: { since: 2026-11-21, sunset: 2030-12-05 } }\n  - { method: GET, path: /v1/widgets, stability: beta }\n' })
  })
  t.match(gw.logs.filter((l) => l.msg === 'endpoint lifecycle rules'), [{ deprecated: ['GET /v1/pets/:petId'], stability: { 'GET /v1/widgets': 'beta' } }])
  t.match(gw.logs.filter((l) => l.level === 40), [{ method: 'GET', path: '/v1/widgets', msg: 'routes.yaml names a route the gateway does not serve; its rule has no effect' }])

  const res = await fetch(`${gw.url}/v1/pets/1`, { headers: PRO })
  t.equal(res.headers.get('link'), null, 'no successor configured, no Link')
  t.equal(res.headers.get('deprecation'), `@${SINCE_SECONDS}`)
  await res.arrayBuffer()
})
