import t from 'tap'
import { DatabaseSync } from '../../src/backend/sqlite.js'
import { assertError, postJson, request, startBackend } from '../helpers/backend.js'

t.test('a known path with another method is 405 method_not_allowed with Allow', async (t) => {
  const backend = await startBackend(t)
  const cases: Array<[string, string, string, string]> = [
    ['DELETE', '/v1/pets', 'GET, HEAD, POST', 'Method DELETE is not allowed on /v1/pets'],
    ['PUT', '/v1/pets', 'GET, HEAD, POST', 'Method PUT is not allowed on /v1/pets'],
    ['OPTIONS', '/v1/pets', 'GET, HEAD, POST', 'Method OPTIONS is not allowed on /v1/pets'],
    ['POST', '/v1/pets/1', 'GET, HEAD', 'Method POST is not allowed on /v1/pets/:petId'],
    ['PATCH', '/v1/pets/1', 'GET, HEAD', 'Method PATCH is not allowed on /v1/pets/:petId'],
    ['DELETE', '/v1/pets/1', 'GET, HEAD', 'Method DELETE is not allowed on /v1/pets/:petId'],
    ['DELETE', '/v1/store/orders', 'GET, HEAD', 'Method DELETE is not allowed on /v1/store/orders']
  ]
  for (const [method, path, allow, message] of cases) {
    const res = await request(`${backend.url}${path}`, { method })
    assertError(t, res, 405, 'method_not_allowed', message)
    t.equal(res.headers.get('allow'), allow, `${method} ${path} Allow`)
  }
})

t.test('HEAD works wherever GET does', async (t) => {
  const backend = await startBackend(t)
  const res = await fetch(`${backend.url}/v1/pets`, { method: 'HEAD' })
  t.equal(res.status, 200)
  t.equal(res.headers.get('content-type'), 'application/json; charset=utf-8')
})

t.test('an unknown path is 404 route_not_found', async (t) => {
  const backend = await startBackend(t)
  assertError(t, await request(`${backend.url}/v1/nothing?x=1`), 404, 'route_not_found', 'No route GET /v1/nothing')
  assertError(t, await request(`${backend.url}/pets`), 404, 'route_not_found', 'No route GET /pets')
  assertError(t, await request(`${backend.url}/v1/pets/1/owner`), 404, 'route_not_found', 'No route GET /v1/pets/1/owner')
  assertError(t, await request(`${backend.url}/v2/pets`, postJson({})), 404, 'route_not_found', 'No route POST /v2/pets')
})

t.test('an unexpected failure is 500 internal_error without internals', async (t) => {
  const backend = await startBackend(t)
  await request(`${backend.url}/v1/pets`, postJson({ name: 'Rex', categoryId: 1 }))
  const saboteur = new DatabaseSync(backend.dbPath)
  saboteur.exec('DROP TABLE orders; DROP TABLE pets')
  saboteur.close()
  for (const [path, init] of [['/v1/pets', undefined], ['/v1/pets/1', undefined], ['/v1/pets', postJson({ name: 'Tom', categoryId: 1 })]] as const) {
    const res = await request(`${backend.url}${path}`, init)
    assertError(t, res, 500, 'internal_error', 'The server could not complete the request')
    t.notMatch(JSON.stringify(res.body), /pets|sqlite|at /i)
  }
})

t.test('the request id comes from x-request-id when sent, else a fresh UUID', async (t) => {
  const backend = await startBackend(t)
  const given = await fetch(`${backend.url}/v1/pets`, { headers: { 'x-request-id': 'gw-123' } })
  t.equal(given.headers.get('x-request-id'), 'gw-123')
  const error = await fetch(`${backend.url}/v1/nope`, { headers: { 'x-request-id': 'gw-456' } })
  t.equal(error.headers.get('x-request-id'), 'gw-456')
  const fresh = await fetch(`${backend.url}/v1/pets`)
  t.match(fresh.headers.get('x-request-id'), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
  const unsafe = await fetch(`${backend.url}/v1/pets`, { headers: { 'x-request-id': 'a b' } })
  t.not(unsafe.headers.get('x-request-id'), 'a b')
  const long = await fetch(`${backend.url}/v1/pets`, { headers: { 'x-request-id': 'x'.repeat(129) } })
  t.equal(long.headers.get('x-request-id')?.length, 36)
})
