// Real responses of the running stack (gateway + backend over HTTP) checked against the served
// description with openapi-backend's response validators (bodies and headers, OpenAPI 3.1).
import { OpenAPIBackend, type Document, type Operation } from 'openapi-backend'
import t, { type Test } from 'tap'
import { startGateway, type StartedGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS, plansYaml, testConfig } from '../../helpers/config-fixture.js'

const PLANS = plansYaml({ free: { perMinute: 2, perDay: 1000 } })
const PRO = bearer(DEMO_KEYS.pro)
const AFTER_SUNSET = Date.UTC(2030, 11, 5) + 1000

interface HeaderSpec { required?: boolean }
interface ResponseSpec { headers?: Record<string, HeaderSpec> }

async function loadApi (gw: StartedGateway): Promise<OpenAPIBackend> {
  const definition = await (await fetch(`${gw.url}/v1/openapi.json`)).json() as Document
  // `quick` skips openapi-backend's own definition check, which knows only the OpenAPI 3.0 schema;
  // document.test.ts validates the document against the 3.1 schema.
  const api = new OpenAPIBackend({ definition, apiRoot: '/v1', validate: true, quick: true, strict: true })
  await api.init()
  return api
}

/** Sends one request and asserts the response conforms to the operation the description routes it to. */
async function conforms (t: Test, api: OpenAPIBackend, gw: StartedGateway, expect: { operationId: string, status: number, code?: string },
  path: string, init: RequestInit = {}): Promise<{ body: unknown, headers: Headers }> {
  const url = new URL(path, gw.url)
  const method = (init.method ?? 'GET').toLowerCase()
  const operation = api.matchOperation({ method, path: url.pathname, query: Object.fromEntries(url.searchParams), headers: {} }) as Operation | undefined
  const label = `${method.toUpperCase()} ${path} → ${expect.status}`
  t.equal(operation?.operationId, expect.operationId, `${label}: routed to ${expect.operationId}`)
  const res = await fetch(url, init)
  const text = await res.text()
  const body: unknown = text === '' ? undefined : JSON.parse(text)
  t.equal(res.status, expect.status, label)
  if (expect.code !== undefined) t.equal((body as { code?: string }).code, expect.code, `${label}: code`)
  if (operation === undefined) return { body, headers: res.headers }
  const headers = Object.fromEntries(res.headers)
  const bodyResult = api.validateResponse(body, operation, res.status)
  t.same(bodyResult.errors, null, `${label}: body conforms`)
  const headerResult = api.validateResponseHeaders(headers, operation, { statusCode: res.status })
  t.same(headerResult.errors, null, `${label}: headers conform`)
  const spec = (operation.responses as Record<string, ResponseSpec>)[String(res.status)]
  t.ok(spec, `${label}: status documented`)
  const missing = Object.entries(spec?.headers ?? {}).filter(([name, h]) => h.required === true && headers[name.toLowerCase()] === undefined).map(([name]) => name)
  t.same(missing, [], `${label}: required headers present`)
  return { body, headers: res.headers }
}

function json (body: unknown, headers: Record<string, string> = PRO): RequestInit {
  return { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(body) }
}

t.test('live responses of every operation conform to the served description', async (t) => {
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': PLANS }) })
  const api = await loadApi(gw)

  for (const name of ['Rex', 'Tom', 'Kit']) {
    await conforms(t, api, gw, { operationId: 'createPet', status: 201 }, '/v1/pets', json({ name, categoryId: 1 }))
  }
  await conforms(t, api, gw, { operationId: 'createPet', status: 201 }, '/v1/pets', json({ name: 'Sold', categoryId: 2, status: 'sold' }))
  const first = await conforms(t, api, gw, { operationId: 'listPets', status: 200 }, '/v1/pets?limit=2', { headers: PRO })
  t.match(first.headers.get('link'), /^<\/v1\/pets\?cursor=[A-Za-z0-9_-]+&limit=2>; rel="next"$/)
  const next = /^<([^>]+)>/.exec(first.headers.get('link') ?? '')?.[1] ?? ''
  const second = await conforms(t, api, gw, { operationId: 'listPets', status: 200 }, next, { headers: PRO })
  t.equal(second.headers.get('link'), null, 'last page')
  await conforms(t, api, gw, { operationId: 'listPets', status: 200 }, '/v1/pets?status=sold', { headers: PRO })
  await conforms(t, api, gw, { operationId: 'listPets', status: 400, code: 'invalid_parameter' }, '/v1/pets?limit=0', { headers: PRO })
  await conforms(t, api, gw, { operationId: 'listPets', status: 401, code: 'unauthorized' }, '/v1/pets')
  await conforms(t, api, gw, { operationId: 'listPets', status: 401, code: 'unauthorized' }, '/v1/pets', { headers: bearer('wrong') })

  await conforms(t, api, gw, { operationId: 'createPet', status: 400, code: 'invalid_body' }, '/v1/pets', json({ categoryId: 1 }))
  await conforms(t, api, gw, { operationId: 'createPet', status: 413, code: 'payload_too_large' }, '/v1/pets', json({ name: 'x'.repeat(20_000), categoryId: 1 }))
  await conforms(t, api, gw, { operationId: 'createPet', status: 415, code: 'unsupported_media_type' }, '/v1/pets',
    { method: 'POST', headers: { ...PRO, 'content-type': 'text/plain' }, body: 'Rex' })

  const pet = await conforms(t, api, gw, { operationId: 'getPet', status: 200 }, '/v1/pets/1', { headers: PRO })
  t.same(pet.body, { id: 1, name: 'Rex', categoryId: 1, status: 'available' })
  t.equal(pet.headers.get('sunset'), 'Thu, 05 Dec 2030 00:00:00 GMT')
  await conforms(t, api, gw, { operationId: 'getPet', status: 404, code: 'not_found' }, '/v1/pets/999', { headers: PRO })
  await conforms(t, api, gw, { operationId: 'getPet', status: 400, code: 'invalid_parameter' }, '/v1/pets/abc', { headers: PRO })
  await conforms(t, api, gw, { operationId: 'getPet', status: 401, code: 'unauthorized' }, '/v1/pets/1')

  const orders = await conforms(t, api, gw, { operationId: 'listOrders', status: 200 }, '/v1/store/orders', { headers: PRO })
  t.same(orders.body, [])
  t.equal(orders.headers.get('x-api-stability'), 'experimental')
  await conforms(t, api, gw, { operationId: 'listOrders', status: 400, code: 'invalid_parameter' }, '/v1/store/orders?cursor=bad!', { headers: PRO })

  const FREE = bearer(DEMO_KEYS.free)
  await conforms(t, api, gw, { operationId: 'listOrders', status: 200 }, '/v1/store/orders', { headers: FREE })
  await conforms(t, api, gw, { operationId: 'listPets', status: 200 }, '/v1/pets', { headers: FREE })
  const limited = await conforms(t, api, gw, { operationId: 'getPet', status: 429, code: 'rate_limited' }, '/v1/pets/1', { headers: FREE })
  t.ok(Number(limited.headers.get('retry-after')) >= 1)

  await gw.backend?.close()
  await conforms(t, api, gw, { operationId: 'listPets', status: 502, code: 'upstream_unavailable' }, '/v1/pets', { headers: PRO })
})

t.test('after the sunset, getPet answers 410 as described', async (t) => {
  const gw = await startGateway(t, { now: () => AFTER_SUNSET })
  const api = await loadApi(gw)
  await conforms(t, api, gw, { operationId: 'getPet', status: 410, code: 'endpoint_removed' }, '/v1/pets/1', { headers: PRO })
})

t.test('the validator is not lenient: a response that breaks the description is reported', async (t) => {
  const gw = await startGateway(t)
  const api = await loadApi(gw)
  t.not(api.validateResponse({ id: 1, name: 'Rex', categoryId: 1, status: 'lost' }, 'getPet', 200).errors, null, 'bad enum')
  t.not(api.validateResponse([{ id: 0, name: 'Rex', categoryId: 1, status: 'sold' }], 'listPets', 200).errors, null, 'id below 1')
  t.not(api.validateResponse({ code: 'rate_limited', message: 'x', status: 400 }, 'listPets', 429).errors, null, 'status must equal the HTTP status')
  t.not(api.validateResponse({ code: 'oops', message: 'x', status: 429 }, 'listPets', 429).errors, null, 'code outside the 429 codes')
  t.not(api.validateResponseHeaders({ sunset: 'Fri, 06 Dec 2030 00:00:00 GMT' }, 'getPet', { statusCode: 200 }).errors, null, 'wrong Sunset')
  t.not(api.validateResponseHeaders({ 'x-ratelimit-remaining': '-1' }, 'getPet', { statusCode: 200 }).errors, null, 'negative remaining')
})
