import t from 'tap'
import { createHash } from 'node:crypto'
import { connect } from 'node:net'
import { startGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS, testConfig } from '../../helpers/config-fixture.js'
import { startEchoUpstream } from '../../helpers/echo-upstream.js'

const REALM = 'Bearer realm="petstore"'
const INVALID = `${REALM}, error="invalid_token"`

interface RawResponse { status: number, headers: Record<string, string>, body: string }

/** One HTTP/1.1 request over a plain socket: for header values `fetch` refuses to send. */
async function rawRequest (url: string, authorization: string): Promise<RawResponse> {
  const { hostname, port } = new URL(url)
  const socket = connect(Number(port), hostname)
  const chunks: Buffer[] = []
  socket.on('data', (c: Buffer) => chunks.push(c))
  await new Promise((resolve) => socket.once('connect', resolve))
  socket.write(Buffer.from(`GET /v1/pets HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: ${authorization}\r\nConnection: close\r\n\r\n`, 'utf8'))
  await new Promise((resolve, reject) => { socket.once('close', resolve); socket.once('error', reject) })
  const text = Buffer.concat(chunks).toString('utf8')
  const [head = '', body = ''] = text.split('\r\n\r\n', 2)
  const [statusLine = '', ...lines] = head.split('\r\n')
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const i = line.indexOf(':')
    headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim()
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body }
}

t.test('a request without Authorization is 401 unauthorized with a Bearer challenge', async (t) => {
  const gw = await startGateway(t)
  const res = await fetch(`${gw.url}/v1/pets`)
  t.equal(res.status, 401)
  t.equal(res.headers.get('www-authenticate'), REALM)
  t.match(res.headers.get('content-type'), /^application\/json/)
  t.same(await res.json(), { code: 'unauthorized', message: 'Missing API key: send "Authorization: Bearer <key>"; the API is documented at /docs', status: 401 })
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
  // A raw socket, not fetch: fetch refuses some of these values (trailing space, non-ASCII) itself.
  for (const authorization of cases) {
    const res = await rawRequest(gw.url, authorization)
    t.equal(res.status, 401, authorization.slice(0, 40))
    t.equal(res.headers['www-authenticate'], INVALID)
    t.same(JSON.parse(res.body), { code: 'unauthorized', message: 'Invalid API key', status: 401 })
  }
  t.equal(gw.logs.filter((l) => l.msg === 'request' && l.status === 401).length, cases.length, 'every case reached the gateway')
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

const EXPIRING_KEY = 'psk_expiring_partner_key_0123456789'
const READ_ONLY_KEY = 'psk_read_only_partner_key_0123456789'
const WRITE_ONLY_KEY = 'psk_write_only_partner_key_012345678'
const ROTATED_OLD = 'psk_acme_old_credential_0123456789ab'
const ROTATED_NEW = 'psk_acme_new_credential_0123456789ab'
const sha = (key: string): string => createHash('sha256').update(key).digest('hex')
const EXPIRES_AT = Date.UTC(2030, 0, 2, 3, 4, 5)

function credentialsConfig (): ReturnType<typeof testConfig> {
  return testConfig({
    'keys.yaml': 'keys:\n' +
      `  - { id: expiring, sha256: ${sha(EXPIRING_KEY)}, plan: free, expiresAt: "2030-01-02T03:04:05Z" }\n` +
      `  - { id: reader, sha256: ${sha(READ_ONLY_KEY)}, plan: free, scopes: [read] }\n` +
      `  - { id: writer, sha256: ${sha(WRITE_ONLY_KEY)}, plan: free, scopes: [write] }\n` +
      `  - { id: acme-old, consumer: acme, sha256: ${sha(ROTATED_OLD)}, plan: pro }\n` +
      `  - { id: acme-new, consumer: acme, sha256: ${sha(ROTATED_NEW)}, plan: pro }\n`
  })
}

t.test('an expiring key carries X-API-Key-Expires, then is 401 key_expired the instant it expires, with no reload', async (t) => {
  let now = EXPIRES_AT - 1000
  const gw = await startGateway(t, { config: credentialsConfig(), now: () => now })
  const before = await fetch(`${gw.url}/v1/pets`, { headers: bearer(EXPIRING_KEY) })
  t.equal(before.status, 200)
  t.equal(before.headers.get('x-api-key-expires'), 'Wed, 02 Jan 2030 03:04:05 GMT', 'IMF-fixdate of expiresAt')
  await before.arrayBuffer()
  const notFound = await fetch(`${gw.url}/v1/nowhere`, { headers: bearer(EXPIRING_KEY) })
  t.equal(notFound.status, 404)
  t.equal(notFound.headers.get('x-api-key-expires'), 'Wed, 02 Jan 2030 03:04:05 GMT', 'on error responses too')
  await notFound.arrayBuffer()
  const other = await fetch(`${gw.url}/v1/pets`, { headers: bearer(ROTATED_OLD) })
  t.equal(other.status, 200)
  t.equal(other.headers.get('x-api-key-expires'), null, 'a key without expiresAt has no such header')
  await other.arrayBuffer()

  now = EXPIRES_AT
  const after = await fetch(`${gw.url}/v1/pets`, { headers: bearer(EXPIRING_KEY) })
  t.equal(after.status, 401)
  t.equal(after.headers.get('www-authenticate'), `${REALM}, error="invalid_token", error_description="The API key expired"`)
  t.equal(after.headers.get('x-api-key-expires'), null)
  t.strictSame(await after.json(), { code: 'key_expired', message: 'API key expired at 2030-01-02T03:04:05.000Z', status: 401 })
  t.equal(after.headers.get('x-ratelimit-limit'), '30', 'counted against the client address (anonymous policy), like any invalid key')
  const anonymous = await fetch(`${gw.url}/v1/pets`)
  t.equal(Number(anonymous.headers.get('x-ratelimit-remaining')), Number(after.headers.get('x-ratelimit-remaining')) - 1, 'same address window')
  await anonymous.arrayBuffer()
})

t.test('scopes: a read-only key may GET but not POST (403 insufficient_scope, counted against the consumer); a write-only key the reverse', async (t) => {
  const gw = await startGateway(t, { config: credentialsConfig() })
  const get = await fetch(`${gw.url}/v1/pets`, { headers: bearer(READ_ONLY_KEY) })
  t.equal(get.status, 200)
  await get.arrayBuffer()
  const remainingBefore = Number(get.headers.get('x-ratelimit-remaining'))

  const post = await fetch(`${gw.url}/v1/pets`, {
    method: 'POST', headers: { ...bearer(READ_ONLY_KEY), 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Rex', categoryId: 1 })
  })
  t.equal(post.status, 403)
  t.equal(post.headers.get('www-authenticate'), `${REALM}, error="insufficient_scope"`)
  t.strictSame(await post.json(), { code: 'insufficient_scope', message: 'This API key may not POST: it lacks the "write" scope', status: 403 })
  t.equal(post.headers.get('x-ratelimit-limit'), '60', 'the key\'s plan, not the anonymous policy')
  t.equal(Number(post.headers.get('x-ratelimit-remaining')), remainingBefore - 1, 'the 403 counts against the consumer')
  const head = await fetch(`${gw.url}/v1/pets`, { method: 'HEAD', headers: bearer(READ_ONLY_KEY) })
  t.equal(head.status, 200, 'HEAD is a read')

  const writerGet = await fetch(`${gw.url}/v1/pets`, { headers: bearer(WRITE_ONLY_KEY) })
  t.equal(writerGet.status, 403)
  t.match(await writerGet.json(), { code: 'insufficient_scope', message: 'This API key may not GET: it lacks the "read" scope', status: 403 })
  const writerPost = await fetch(`${gw.url}/v1/pets`, {
    method: 'POST', headers: { ...bearer(WRITE_ONLY_KEY), 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Rex', categoryId: 1 })
  })
  t.equal(writerPost.status, 201)
  await writerPost.arrayBuffer()
  const both = await fetch(`${gw.url}/v1/pets`, { headers: bearer(ROTATED_OLD) })
  t.equal(both.status, 200, 'a key without scopes has both')
  await both.arrayBuffer()
})

t.test('credentials of one consumer: the backend sees the consumer id, the request log both consumer and credential', async (t) => {
  const upstream = await startEchoUpstream(t)
  const gw = await startGateway(t, { config: credentialsConfig(), backendUrl: upstream.url })
  for (const key of [ROTATED_OLD, ROTATED_NEW]) {
    const res = await fetch(`${gw.url}/v1/pets`, { headers: bearer(key) })
    t.equal(res.status, 200)
    await res.arrayBuffer()
  }
  t.same(upstream.received.map((r) => r.headers['x-consumer-id']), ['acme', 'acme'])
  t.same(upstream.received.map((r) => r.headers['x-consumer-plan']), ['pro', 'pro'])
  const lines = gw.logs.filter((l) => l.msg === 'request')
  t.match(lines, [{ consumerId: 'acme', keyId: 'acme-old' }, { consumerId: 'acme', keyId: 'acme-new' }])
})
