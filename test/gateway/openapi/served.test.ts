import { gunzipSync } from 'node:zlib'
import { readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import t from 'tap'
import { keyDigest } from '../../../src/gateway/auth/bearer.js'
import { createConfigHolder } from '../../../src/gateway/config/plugin.js'
import { buildOpenApiDocument } from '../../../src/gateway/openapi/document.js'
import { startGateway } from '../../helpers/gateway.js'
import { ADMIN_JSON, bearer, configTexts, DEMO_KEYS, plansYaml, testConfig } from '../../helpers/config-fixture.js'

const swaggerUiDir = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'))
const swaggerUiVersion = (JSON.parse(readFileSync(join(swaggerUiDir, 'package.json'), 'utf8')) as { version: string }).version
const TINY_ANONYMOUS = plansYaml({ anonymous: { perMinute: 4, perDay: 300 } })

t.test('GET /v1/openapi.json needs no key: the document of the config in force, outside the anonymous limit (no rate-limit headers)', async (t) => {
  const config = testConfig()
  const gw = await startGateway(t, { config })
  const res = await fetch(`${gw.url}/v1/openapi.json`)
  t.equal(res.status, 200)
  t.equal(res.headers.get('content-type'), 'application/json; charset=utf-8')
  t.equal(res.headers.get('cache-control'), 'no-cache')
  t.equal(res.headers.get('x-ratelimit-limit'), null)
  t.equal(res.headers.get('ratelimit-policy'), null)
  t.match(res.headers.get('x-request-id'), /^[0-9a-f-]{36}$/)
  t.same(await res.json(), buildOpenApiDocument(config))
  t.equal(res.headers.get('www-authenticate'), null)
})

t.test('with a valid key it is counted against the key; an invalid key does not turn it into a 401 and spends nothing', async (t) => {
  const gw = await startGateway(t)
  const keyed = await fetch(`${gw.url}/v1/openapi.json`, { headers: bearer(DEMO_KEYS.free) })
  t.equal(keyed.status, 200)
  t.equal(keyed.headers.get('x-ratelimit-limit'), '60')
  t.equal(keyed.headers.get('x-ratelimit-remaining'), '59')
  const invalid = await fetch(`${gw.url}/v1/openapi.json`, { headers: bearer('not-a-key') })
  t.equal(invalid.status, 200)
  t.equal(invalid.headers.get('x-ratelimit-limit'), null)
  await keyed.arrayBuffer()
  await invalid.arrayBuffer()
})

/** A whole cold load of the docs page, as a browser makes it: page, stylesheet, script, description. */
async function loadDocs (url: string): Promise<number[]> {
  const statuses: number[] = []
  for (const path of ['/docs', `/docs/static/swagger-ui.css?v=${swaggerUiVersion}`, `/docs/static/swagger-ui-bundle.js?v=${swaggerUiVersion}`, '/v1/openapi.json']) {
    const res = await fetch(`${url}${path}`)
    await res.arrayBuffer()
    statuses.push(res.status)
  }
  return statuses
}

t.test('a newcomer whose failed key spent the anonymous budget still gets the docs page (regression: /v1/openapi.json answered 429, "Failed to load API definition")', async (t) => {
  const dir = t.testdir(configTexts({ 'plans.yaml': TINY_ANONYMOUS }))
  const gw = await startGateway(t, { reload: { dir, watch: false } })
  const NEW_KEY = 'psk_newcomer_0123456789abcdefABCDEFGHIJ'
  // Polling with a key the running config does not have yet: 401s, then 429s once the 4/min are spent.
  const polled: number[] = []
  for (let i = 0; i < 6; i++) {
    const res = await fetch(`${gw.url}/v1/pets`, { headers: bearer(NEW_KEY) })
    await res.arrayBuffer()
    polled.push(res.status)
  }
  t.same(polled, [401, 401, 401, 401, 429, 429], 'the anonymous budget of this address is spent')
  t.same(await loadDocs(gw.url), [200, 200, 200, 200], 'the docs page, its assets and the description all load')
  t.same(await loadDocs(gw.url), [200, 200, 200, 200], 'and again: no budget of their own to run out')

  // The reload lands: the key works, and the docs page still loads.
  writeFileSync(join(dir, 'keys.yaml'), `keys:\n  - { id: newcomer, sha256: ${keyDigest(NEW_KEY)}, plan: free }\n`)
  const reload = await fetch(`${gw.adminUrl}/admin/reload`, { method: 'POST', headers: ADMIN_JSON })
  t.equal(reload.status, 200)
  const works = await fetch(`${gw.url}/v1/pets`, { headers: bearer(NEW_KEY) })
  t.equal(works.status, 200)
  await works.arrayBuffer()
})

t.test('the public documents spend no anonymous budget: a keyless API request after many of them still has its whole minute', async (t) => {
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': TINY_ANONYMOUS }) })
  for (let i = 0; i < 3; i++) t.same(await loadDocs(gw.url), [200, 200, 200, 200])
  const api = await fetch(`${gw.url}/v1/pets`)
  t.equal(api.status, 401)
  t.equal(api.headers.get('x-ratelimit-remaining'), '3', 'the first anonymous request of the minute (4 − 1)')
  await api.arrayBuffer()
})

t.test('other methods on the public documents are 405 with Allow, without a key', async (t) => {
  const gw = await startGateway(t)
  for (const path of ['/v1/openapi.json', '/docs', '/docs/static/swagger-ui-bundle.js']) {
    const res = await fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
    t.equal(res.status, 405, path)
    t.equal(res.headers.get('allow'), 'GET, HEAD')
    t.same(await res.json(), { code: 'method_not_allowed', message: `Method POST is not allowed on ${path}`, status: 405 })
  }
  const unknown = await fetch(`${gw.url}/docs/static/nope.js`)
  t.equal(unknown.status, 401, 'anything else under /docs is not public')
  await unknown.arrayBuffer()
})

t.test('a config reload changes the served document (built once per snapshot)', async (t) => {
  const holder = createConfigHolder(testConfig())
  const gw = await startGateway(t, { config: holder })
  const before = await (await fetch(`${gw.url}/v1/openapi.json`)).json() as { paths: Record<string, Record<string, { deprecated?: boolean }>> }
  t.equal(before.paths['/pets/{petId}']?.get?.deprecated, true)
  holder.swap(testConfig({ 'routes.yaml': 'routes: []\n' }))
  const after = await (await fetch(`${gw.url}/v1/openapi.json`)).json() as typeof before
  t.equal(after.paths['/pets/{petId}']?.get?.deprecated, undefined)
})

t.test('GET /docs: Swagger UI from the package, same-origin only, two immutable assets', async (t) => {
  const gw = await startGateway(t)
  const res = await fetch(`${gw.url}/docs`)
  t.equal(res.status, 200)
  t.equal(res.headers.get('content-type'), 'text/html; charset=utf-8')
  t.equal(res.headers.get('x-content-type-options'), 'nosniff')
  t.match(res.headers.get('content-security-policy'), /^default-src 'none'; script-src 'self' 'sha256-[A-Za-z0-9+/=]+'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; /)
  t.equal(res.headers.get('x-ratelimit-limit'), null, 'outside the anonymous limit')
  const html = await res.text()
  const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1])
  t.same(assets, ['data:,', `/docs/static/swagger-ui.css?v=${swaggerUiVersion}`, `/docs/static/swagger-ui-bundle.js?v=${swaggerUiVersion}`])
  t.match(html, /"url":"\/v1\/openapi.json"/)
  t.notMatch(html, /https?:\/\//, 'nothing from another origin')

  for (const [name, type] of [['swagger-ui.css', 'text/css; charset=utf-8'], ['swagger-ui-bundle.js', 'text/javascript; charset=utf-8']] as const) {
    const plain = await fetch(`${gw.url}/docs/static/${name}?v=${swaggerUiVersion}`, { headers: { 'accept-encoding': 'identity' } })
    t.equal(plain.status, 200)
    t.equal(plain.headers.get('content-type'), type)
    t.equal(plain.headers.get('cache-control'), 'public, max-age=31536000, immutable')
    t.equal(plain.headers.get('content-encoding'), null)
    const body = Buffer.from(await plain.arrayBuffer())
    t.ok(body.equals(readFileSync(join(swaggerUiDir, name))), `${name} is the package's file`)
    // fetch decodes gzip itself; ask the server directly with Node's http to see the encoded bytes.
    const gz = await new Promise<{ encoding: string | undefined, body: Buffer }>((resolve, reject) => {
      import('node:http').then(({ get }) => {
        get(`${gw.url}/docs/static/${name}`, { headers: { 'accept-encoding': 'gzip, br' } }, (r) => {
          const chunks: Buffer[] = []
          r.on('data', (c: Buffer) => chunks.push(c))
          r.on('end', () => resolve({ encoding: r.headers['content-encoding'], body: Buffer.concat(chunks) }))
        }).on('error', reject)
      }, reject)
    })
    t.equal(gz.encoding, 'gzip')
    t.ok(gunzipSync(gz.body).equals(body), `${name} gzipped`)
  }
})
