// What the backend receives, seen by a real HTTP server standing in for it: method overrides (and
// their `_` twins) never arrive, so a read-only key's GET stays a GET whatever it carries; identity
// headers are the gateway's; everything else passes through untouched.
import { createHash } from 'node:crypto'
import { request } from 'node:http'
import t from 'tap'
import { GATEWAY_OWNED, METHOD_OVERRIDES } from '../../../src/gateway/proxy/request-headers.js'
import { startEchoUpstream } from '../../helpers/echo-upstream.js'
import { startGateway } from '../../helpers/gateway.js'
import { bearer, testConfig } from '../../helpers/config-fixture.js'

const READ_ONLY_KEY = 'psk_read_only_override_key_0123456789'
const sha = (key: string): string => createHash('sha256').update(key).digest('hex')
const config = testConfig({ 'keys.yaml': `keys:\n  - { id: reader, sha256: ${sha(READ_ONLY_KEY)}, plan: free, scopes: [read] }\n` })

/** Every spelling of the three override headers the backend (or a framework before it) could honour. */
const OVERRIDE_SPELLINGS = [
  'X-HTTP-Method-Override', 'X-HTTP-Method', 'X-Method-Override',
  'X_HTTP_Method_Override', 'x_http_method', 'X_Method-Override', 'x-method_override'
]

t.test('method overrides never reach the backend: a read-only key\'s GET stays a GET (regression: X-HTTP-Method-Override: DELETE forwarded)', async (t) => {
  const upstream = await startEchoUpstream(t)
  const gw = await startGateway(t, { config, backendUrl: upstream.url })
  for (const name of OVERRIDE_SPELLINGS) {
    const res = await fetch(`${gw.url}/v1/pets`, { headers: { ...bearer(READ_ONLY_KEY), [name]: 'DELETE', 'x-kept': 'yes' } })
    t.equal(res.status, 200, `${name}: the GET is allowed for a read-only key`)
    await res.arrayBuffer()
  }
  t.equal(upstream.received.length, OVERRIDE_SPELLINGS.length)
  for (const [i, seen] of upstream.received.entries()) {
    const spelling = OVERRIDE_SPELLINGS[i] ?? ''
    t.equal(seen.method, 'GET', `${spelling}: the backend sees the real method`)
    const overrides = Object.keys(seen.headers).filter((name) => (METHOD_OVERRIDES as readonly string[]).includes(name.replaceAll('_', '-')))
    t.strictSame(overrides, [], `${spelling}: no override header arrives`)
    t.notOk(Object.values(seen.headers).includes('DELETE'), `${spelling}: its value is nowhere`)
    t.equal(seen.headers['x-kept'], 'yes', 'other headers pass through')
  }
})

t.test('an override on a write is dropped too: the backend runs the POST the key was allowed, not the override', async (t) => {
  const upstream = await startEchoUpstream(t)
  const gw = await startGateway(t, { backendUrl: upstream.url })
  const res = await fetch(`${gw.url}/v1/pets`, {
    method: 'POST',
    headers: { ...bearer('psk_demo_free_bdxDZXIFscNgMlSRUnWEc7yM'), 'content-type': 'application/json', 'x-http-method-override': 'PUT' },
    body: JSON.stringify({ name: 'Rex', categoryId: 1 })
  })
  t.equal(res.status, 200)
  await res.arrayBuffer()
  t.equal(upstream.received[0]?.method, 'POST')
  t.equal(upstream.received[0]?.headers['x-http-method-override'], undefined)
})

t.test('the dropped set is the gateway-owned headers plus the overrides, and identity headers are the gateway\'s', async (t) => {
  t.ok(GATEWAY_OWNED.includes('x-consumer-id') && GATEWAY_OWNED.includes('authorization'))
  t.strictSame([...METHOD_OVERRIDES].sort(), ['x-http-method', 'x-http-method-override', 'x-method-override'])
  const upstream = await startEchoUpstream(t)
  const gw = await startGateway(t, { config, backendUrl: upstream.url })
  const res = await fetch(`${gw.url}/v1/pets`, { headers: { ...bearer(READ_ONLY_KEY), 'x-consumer-id': 'admin', 'x-consumer-plan': 'enterprise', 'x-request-id': 'forged' } })
  t.equal(res.status, 200)
  await res.arrayBuffer()
  const seen = upstream.received[0]?.headers ?? {}
  t.equal(seen['x-consumer-id'], 'reader')
  t.equal(seen['x-consumer-plan'], 'free')
  t.equal(seen['x-request-id'], res.headers.get('x-request-id'))
  t.equal(seen.authorization, undefined, 'the key is not forwarded')
})

t.test('headers a client\'s Connection header lists stay at the gateway; a plain keep-alive drops nothing else', async (t) => {
  const upstream = await startEchoUpstream(t)
  const gw = await startGateway(t, { config, backendUrl: upstream.url })
  // node:http, not fetch or undici: they refuse to send a Connection header of the caller's.
  const send = async (connection: string): Promise<void> => {
    const status = await new Promise<number | undefined>((resolve, reject) => {
      request(`${gw.url}/v1/pets`, { headers: { ...bearer(READ_ONLY_KEY), connection, 'x-hop': 'client-only', 'x-kept': 'yes' } }, (res) => {
        res.resume()
        res.on('end', () => { resolve(res.statusCode) })
      }).on('error', reject).end()
    })
    t.equal(status, 200)
  }
  await send('keep-alive, X-Hop')
  await send('Keep-Alive')
  const [listed, plain] = upstream.received
  t.equal(listed?.headers['x-hop'], undefined, 'listed in Connection: not forwarded')
  t.equal(listed?.headers['x-kept'], 'yes')
  t.equal(plain?.headers['x-hop'], 'client-only', 'not listed: forwarded')
  t.equal(plain?.headers['x-kept'], 'yes')
})
