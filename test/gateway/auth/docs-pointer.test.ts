// A newcomer's first request has no key (`curl localhost:8080/`): the 401 must say where the
// documentation is — in the message and as `Link: </docs>; rel="help"` — and must say it the same
// way on every path, so an unauthenticated client learns nothing about which paths exist beyond the
// public OpenAPI document. `/docs/` (trailing slash) leads to the docs page.
import t from 'tap'
import { DOCS_LINK } from '../../../src/interface/errors.js'
import { startGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS, plansYaml, testConfig } from '../../helpers/config-fixture.js'

const MISSING = { code: 'unauthorized', message: 'Missing API key: send "Authorization: Bearer <key>"; the API is documented at /docs', status: 401 }
/** Headers that differ per request by design (identity, counters, time), left out of the comparison. */
const PER_REQUEST = new Set(['x-request-id', 'date', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'ratelimit'])

function stableHeaders (res: Response): Record<string, string> {
  return Object.fromEntries([...res.headers].filter(([name]) => !PER_REQUEST.has(name)))
}

t.test('without a key, every path that is not public answers the same 401, pointing at the documentation', async (t) => {
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': plansYaml({ anonymous: { perMinute: 100, perDay: 1000 } }) }) })
  const requests: Array<[string, string]> = [
    ['GET', '/'], ['GET', '/v1/pets'], ['GET', '/v1/pets/1'], ['POST', '/v1/pets'], ['GET', '/v1/store/orders'],
    ['GET', '/nope'], ['GET', '/v1/nope'], ['DELETE', '/v1/pets/1'], ['GET', '/admin/config'], ['GET', '/docs/static/nothing.js'], ['GET', '/v2/']
  ]
  let first: Record<string, string> | undefined
  for (const [method, path] of requests) {
    const res = await fetch(`${gw.url}${path}`, { method })
    t.equal(res.status, 401, `${method} ${path}`)
    t.strictSame(await res.json(), MISSING, `${method} ${path}: the Error shape naming /docs`)
    t.equal(res.headers.get('link'), DOCS_LINK, `${method} ${path}: Link to the docs`)
    t.equal(res.headers.get('www-authenticate'), 'Bearer realm="petstore"')
    t.equal(res.headers.get('x-ratelimit-limit'), '100', 'counted under the anonymous policy, with its headers')
    const headers = stableHeaders(res)
    first ??= headers
    t.strictSame(headers, first, `${method} ${path}: the same headers as every other path`)
  }
  t.equal(DOCS_LINK, '</docs>; rel="help", </v1/openapi.json>; rel="service-desc"')
  for (const target of DOCS_LINK.matchAll(/<([^>]+)>/g)) {
    const res = await fetch(`${gw.url}${target[1] ?? ''}`)
    t.equal(res.status, 200, `${target[1] ?? ''}, named by the Link, is served without a key`)
    await res.arrayBuffer()
  }
})

t.test('a presented key changes nothing: an unknown path is 404, an invalid key 401 without the pointer', async (t) => {
  const gw = await startGateway(t)
  const root = await fetch(`${gw.url}/`, { headers: bearer(DEMO_KEYS.free) })
  t.equal(root.status, 404)
  t.strictSame(await root.json(), { code: 'route_not_found', message: 'No route GET /', status: 404 })
  t.equal(root.headers.get('link'), null)
  const invalid = await fetch(`${gw.url}/`, { headers: bearer('psk_not_a_key') })
  t.equal(invalid.status, 401)
  t.strictSame(await invalid.json(), { code: 'unauthorized', message: 'Invalid API key', status: 401 })
  t.equal(invalid.headers.get('link'), null)
})

t.test('/docs/ redirects to /docs without a key, outside the anonymous limit like the page', async (t) => {
  const gw = await startGateway(t)
  const res = await fetch(`${gw.url}/docs/`, { redirect: 'manual' })
  t.equal(res.status, 301)
  t.equal(res.headers.get('location'), '/docs')
  t.equal(res.headers.get('x-ratelimit-limit'), null)
  t.equal(res.headers.get('www-authenticate'), null)
  await res.arrayBuffer()
  const followed = await fetch(`${gw.url}/docs/`)
  t.equal(followed.status, 200)
  t.match(followed.headers.get('content-type'), /^text\/html/)
  await followed.arrayBuffer()
  const api = await fetch(`${gw.url}/v1/pets`)
  t.equal(api.headers.get('x-ratelimit-remaining'), '29', 'the redirect and the page spent nothing: the first anonymous request is 30 − 1')
  await api.arrayBuffer()
  const post = await fetch(`${gw.url}/docs/`, { method: 'POST' })
  t.equal(post.status, 405)
  t.equal(post.headers.get('allow'), 'GET, HEAD')
  await post.arrayBuffer()
})
