import t from 'tap'
import { createHash } from 'node:crypto'
import { bearer, DEMO_KEYS, startGateway, testConfig } from '../helpers/gateway.js'
import { startEchoUpstream } from '../helpers/echo-upstream.js'

const REALM = 'Bearer realm="petstore"'
const INVALID = `${REALM}, error="invalid_token"`

t.test('a request without Authorization is 401 unauthorized with a Bearer challenge', async (t) => {
  const gw = await startGateway(t)
  const res = await fetch(`${gw.url}/v1/pets`)
  t.equal(res.status, 401)
  t.equal(res.headers.get('www-authenticate'), REALM)
  t.match(res.headers.get('content-type'), /^application\/json/)
  t.same(await res.json(), { code: 'unauthorized', message: 'Missing API key: send "Authorization: Bearer <key>"', status: 401 })
})

t.test('malformed and unknown keys are 401 with error="invalid_token"', async (t) => {
  const gw = await startGateway(t)
  const cases = [
    `Bearer not-a-configured-key`,
    `Bearer ${DEMO_KEYS.free} extra`,
    `Bearer  ${DEMO_KEYS.free}`,
    `Bearer`,
    `Bearer ${DEMO_KEYS.free}\u00e9`,
    `Basic ${Buffer.from('user:pass').toString('base64')}`,
    `Token ${DEMO_KEYS.free}`,
    `Bearer ${'a'.repeat(300)}`
  ]
  for (const authorization of cases) {
    const res = await fetch(`${gw.url}/v1/pets`, { headers: { authorization } }).catch(() => undefined)
    if (res === undefined) continue // fetch itself refuses some header values; the server never saw them
    t.equal(res.status, 401, authorization.slice(0, 40))
    t.equal(res.headers.get('www-authenticate'), INVALID)
    t.same(await res.json(), { code: 'unauthorized', message: 'Invalid API key', status: 401 })
  }
})

t.test('the scheme name is case-insensitive', async (t) => {
  const gw = await startGateway(t)
  for (const scheme of ['bearer', 'BEARER', 'bEaReR']) {
    const res = await fetch(`${gw.url}/v1/pets`, { headers: { authorization: `${scheme} ${DEMO_KEYS.pro}` } })
    t.equal(res.status, 200, scheme)
    t.same(await res.json(), [])
  }
})

t.test('a disabled key is 401 and says so', async (t) => {
  const digest = createHash('sha256').update('psk_old_partner_key_123').digest('hex')
  const config = testConfig({ 'keys.yaml': `keys:\n  - { id: old-partner, sha256: ${digest}, plan: free, disabled: true }\n` })
  const gw = await startGateway(t, { config })
  const res = await fetch(`${gw.url}/v1/pets`, { headers: bearer('psk_old_partner_key_123') })
  t.equal(res.status, 401)
  t.equal(res.headers.get('www-authenticate'), INVALID)
  t.same(await res.json(), { code: 'unauthorized', message: 'API key is disabled', status: 401 })
})

t.test('every plan key is accepted', async (t) => {
  const gw = await startGateway(t)
  for (const key of Object.values(DEMO_KEYS)) {
    const res = await fetch(`${gw.url}/v1/store/orders`, { headers: bearer(key) })
    t.equal(res.status, 200)
    t.same(await res.json(), [])
  }
})

t.test('the gateway sets identity headers for the backend and drops the client\'s', async (t) => {
  const upstream = await startEchoUpstream(t)
  const gw = await startGateway(t, { backendUrl: upstream.url })
  const res = await fetch(`${gw.url}/v1/pets?limit=5`, {
    headers: {
      ...bearer(DEMO_KEYS.business),
      'x-consumer-id': 'admin',
      'x-consumer-plan': 'enterprise',
      'x-request-id': 'client-chosen-id'
    }
  })
  t.equal(res.status, 200)
  const requestId = res.headers.get('x-request-id')
  t.match(requestId, /^[0-9a-f-]{36}$/)
  t.not(requestId, 'client-chosen-id')
  t.equal(upstream.received.length, 1)
  const seen = upstream.received[0]!
  t.equal(seen.url, '/v1/pets?limit=5')
  t.equal(seen.headers['x-consumer-id'], 'demo-business')
  t.equal(seen.headers['x-consumer-plan'], 'business')
  t.equal(seen.headers['x-request-id'], requestId)
  t.equal(seen.headers.authorization, undefined, 'Authorization is not forwarded')
})

t.test('the key and its digest appear in no response and no log line', async (t) => {
  const gw = await startGateway(t, { logLevel: 'trace' })
  const key = DEMO_KEYS.enterprise
  const digest = createHash('sha256').update(key).digest('hex')
  const bodies: string[] = []
  for (const [path, init] of [
    ['/v1/pets', { headers: bearer(key) }],
    ['/v1/pets', { method: 'POST', headers: { ...bearer(key), 'content-type': 'application/json' }, body: JSON.stringify({ name: key, categoryId: 1 }) }],
    ['/v1/pets/999', { headers: bearer(key) }],
    ['/v1/nowhere', { headers: bearer(key) }],
    ['/v1/pets', { headers: bearer(key + 'x') }]
  ] as const) {
    const res = await fetch(gw.url + path, init)
    bodies.push(JSON.stringify([...res.headers]) + (await res.text()))
  }
  const requestLines = gw.logs.filter((l) => l.msg === 'request')
  t.equal(requestLines.length, 5, 'one log line per request')
  t.equal(requestLines[0]?.keyId, 'demo-enterprise')
  const logs = gw.rawLogs()
  t.notOk(logs.includes(digest), 'digest not logged')
  t.notOk(bodies.join('').includes(digest), 'digest not in responses')
  // the POST echoes the key as a pet name (user data), so only the non-POST bodies must be free of it
  t.notOk(bodies.filter((_, i) => i !== 1).join('').includes(key), 'key not in responses')
  t.notOk(logs.includes(key), 'key not logged')
})
