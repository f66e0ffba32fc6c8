import t from 'tap'
import { startGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS } from '../../helpers/config-fixture.js'
import { startEchoUpstream } from '../../helpers/echo-upstream.js'
import { freePort } from '../../helpers/ports.js'

const KEY = bearer(DEMO_KEYS.enterprise)
const JSON_KEY = { ...KEY, 'content-type': 'application/json' }

t.test('all four operations reach the backend behind auth', async (t) => {
  const gw = await startGateway(t)
  const created = await fetch(`${gw.url}/v1/pets`, { method: 'POST', headers: JSON_KEY, body: JSON.stringify({ name: 'Rex', categoryId: 7 }) })
  t.equal(created.status, 201)
  t.equal(created.headers.get('location'), '/v1/pets/1')
  t.same(await created.json(), { id: 1, name: 'Rex', categoryId: 7, status: 'available' })

  const list = await fetch(`${gw.url}/v1/pets?status=available`, { headers: KEY })
  t.equal(list.status, 200)
  t.same(await list.json(), [{ id: 1, name: 'Rex', categoryId: 7, status: 'available' }])

  const one = await fetch(`${gw.url}/v1/pets/1`, { headers: KEY })
  t.equal(one.status, 200)
  t.same(await one.json(), { id: 1, name: 'Rex', categoryId: 7, status: 'available' })

  const orders = await fetch(`${gw.url}/v1/store/orders`, { headers: KEY })
  t.equal(orders.status, 200)
  t.same(await orders.json(), [])
})

t.test('paging Link headers pass through the gateway and can be followed to the end', async (t) => {
  const gw = await startGateway(t)
  for (let i = 1; i <= 5; i++) {
    const res = await fetch(`${gw.url}/v1/pets`, { method: 'POST', headers: JSON_KEY, body: JSON.stringify({ name: `p${i}`, categoryId: 1 }) })
    t.equal(res.status, 201)
  }
  const ids: number[] = []
  let next: string | undefined = '/v1/pets?limit=2'
  let pages = 0
  while (next !== undefined) {
    const res: Response = await fetch(gw.url + next, { headers: KEY })
    t.equal(res.status, 200)
    ids.push(...((await res.json()) as Array<{ id: number }>).map((p) => p.id))
    next = /<([^>]+)>;\s*rel="next"/.exec(res.headers.get('link') ?? '')?.[1]
    pages++
  }
  t.equal(pages, 3)
  t.same(ids, [1, 2, 3, 4, 5])
})

t.test('backend errors pass through in the Error shape', async (t) => {
  const gw = await startGateway(t)
  const missing = await fetch(`${gw.url}/v1/pets/424242`, { headers: KEY })
  t.equal(missing.status, 404)
  t.same(await missing.json(), { code: 'not_found', message: 'Pet 424242 not found', status: 404 })
  const bad = await fetch(`${gw.url}/v1/pets?limit=0`, { headers: KEY })
  t.equal(bad.status, 400)
  t.match(await bad.json(), { code: 'invalid_parameter', status: 400 })
  const invalid = await fetch(`${gw.url}/v1/pets`, { method: 'POST', headers: JSON_KEY, body: JSON.stringify({ name: 'x' }) })
  t.equal(invalid.status, 400)
  t.match(await invalid.json(), { code: 'invalid_body', status: 400 })
})

t.test('unknown paths are 404 route_not_found, other methods 405 with Allow', async (t) => {
  const gw = await startGateway(t)
  const unknown = await fetch(`${gw.url}/v1/cats`, { headers: KEY })
  t.equal(unknown.status, 404)
  t.same(await unknown.json(), { code: 'route_not_found', message: 'No route GET /v1/cats', status: 404 })

  const anonymousUnknown = await fetch(`${gw.url}/v1/cats`)
  t.equal(anonymousUnknown.status, 401, 'authentication comes before routing')

  for (const [method, path, allow] of [
    ['DELETE', '/v1/pets/1', 'GET, HEAD'],
    ['PUT', '/v1/pets', 'GET, HEAD, POST'],
    ['POST', '/v1/store/orders', 'GET, HEAD']
  ] as const) {
    const res = await fetch(gw.url + path, { method, headers: KEY })
    t.equal(res.status, 405, `${method} ${path}`)
    t.equal(res.headers.get('allow'), allow)
    const pattern = path === '/v1/pets/1' ? '/v1/pets/:petId' : path
    t.same(await res.json(), { code: 'method_not_allowed', message: `Method ${method} is not allowed on ${pattern}`, status: 405 })
  }
})

t.test('edge checks answer 413, 415 and 400 before the backend is called', async (t) => {
  const upstream = await startEchoUpstream(t)
  const gw = await startGateway(t, { backendUrl: upstream.url, bodyLimit: 1024 })
  const big = await fetch(`${gw.url}/v1/pets`, { method: 'POST', headers: JSON_KEY, body: JSON.stringify({ name: 'x'.repeat(2000), categoryId: 1 }) })
  t.equal(big.status, 413)
  t.same(await big.json(), { code: 'payload_too_large', message: 'Request body is over the limit of 1024 bytes', status: 413 }, 'the message says the limit (it did not)')

  const text = await fetch(`${gw.url}/v1/pets`, { method: 'POST', headers: { ...KEY, 'content-type': 'text/plain' }, body: 'name=Rex' })
  t.equal(text.status, 415)
  t.same(await text.json(), { code: 'unsupported_media_type', message: 'Request body must be application/json', status: 415 })

  const broken = await fetch(`${gw.url}/v1/pets`, { method: 'POST', headers: JSON_KEY, body: '{"name": "Rex", ' })
  t.equal(broken.status, 400)
  t.strictSame(await broken.json(), { code: 'invalid_body', message: 'Request body is not valid JSON', status: 400 })

  const proto = await fetch(`${gw.url}/v1/pets`, { method: 'POST', headers: JSON_KEY, body: '{"name":"Rex","categoryId":1,"__proto__":{"admin":true}}' })
  t.equal(proto.status, 400)
  t.match(await proto.json(), { code: 'invalid_body', status: 400 })

  t.equal(upstream.received.length, 0, 'the backend saw none of them')

  const ok = await fetch(`${gw.url}/v1/pets`, { method: 'POST', headers: JSON_KEY, body: JSON.stringify({ name: 'Rex', categoryId: 1 }) })
  t.equal(ok.status, 200)
  t.equal(upstream.received.length, 1)
  t.same(JSON.parse(upstream.received[0]!.body), { name: 'Rex', categoryId: 1 }, 'the body reaches the backend intact')
})

t.test('backend down is 502 upstream_unavailable, quickly', async (t) => {
  const port = await freePort()
  const gw = await startGateway(t, { backendUrl: `http://127.0.0.1:${port}` })
  const started = Date.now()
  const res = await fetch(`${gw.url}/v1/pets`, { headers: KEY })
  t.equal(res.status, 502)
  t.ok(res.headers.get('x-request-id'))
  t.same(await res.json(), { code: 'upstream_unavailable', message: 'The pet store service is unavailable', status: 502 })
  // A refused connection is answered at once; the bound only has to stay clear of the 10 s upstream timeout.
  const ms = Date.now() - started
  t.ok(ms < 5_000, `answered in ${ms} ms, without waiting for the upstream timeout`)
})

t.test('a backend slower than the upstream timeout is 504 upstream_timeout', async (t) => {
  const upstream = await startEchoUpstream(t)
  const timers: NodeJS.Timeout[] = []
  t.teardown(() => { for (const timer of timers) clearTimeout(timer) })
  upstream.behave((_req, res) => { timers.push(setTimeout(() => res.end('late'), 2000)) })
  const gw = await startGateway(t, { backendUrl: upstream.url, upstreamTimeoutMs: 200 })
  const res = await fetch(`${gw.url}/v1/store/orders`, { headers: KEY })
  t.equal(res.status, 504)
  t.same(await res.json(), { code: 'upstream_timeout', message: 'The pet store service did not answer in time', status: 504 })
})

t.test('a backend that resets the connection is 502, not a hang', async (t) => {
  const upstream = await startEchoUpstream(t)
  upstream.behave((req) => { req.socket.destroy() })
  const gw = await startGateway(t, { backendUrl: upstream.url })
  const res = await fetch(`${gw.url}/v1/pets`, { headers: KEY })
  t.equal(res.status, 502)
  t.same(await res.json(), { code: 'upstream_unavailable', message: 'The pet store service is unavailable', status: 502 })
})

t.test('every response carries a fresh x-request-id', async (t) => {
  const gw = await startGateway(t)
  const ids = new Set<string>()
  for (const [path, headers] of [['/v1/pets', KEY], ['/v1/pets', {}], ['/v1/none', KEY], ['/v1/pets/1', KEY]] as const) {
    const res = await fetch(gw.url + path, { headers })
    await res.arrayBuffer()
    const id = res.headers.get('x-request-id')
    t.match(id, /^[0-9a-f-]{36}$/, path)
    ids.add(id ?? '')
  }
  t.equal(ids.size, 4)
})

t.test('a backend answering garbage instead of HTTP is a clean 502', async (t) => {
  const upstream = await startEchoUpstream(t)
  upstream.behave((req) => { req.socket.end('this is not HTTP at all\r\n\r\n') })
  const gw = await startGateway(t, { backendUrl: upstream.url })
  const res = await fetch(`${gw.url}/v1/pets`, { headers: KEY })
  t.equal(res.status, 502)
  t.same(await res.json(), { code: 'upstream_unavailable', message: 'The pet store service is unavailable', status: 502 })
})

t.test('a backend that dies mid-body never passes a half response off as complete', async (t) => {
  const upstream = await startEchoUpstream(t)
  upstream.behave((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' })
    res.write('[{"id":1,"name":"Re')
    setTimeout(() => req.socket.destroy(), 20)
  })
  const gw = await startGateway(t, { backendUrl: upstream.url })
  const res = await fetch(`${gw.url}/v1/pets`, { headers: KEY })
  t.equal(res.status, 200, 'the status line had already been forwarded')
  await t.rejects(res.text(), 'the client sees the body fail, not a short success')
})

t.test('a backend answer that is not relayable HTTP is a clean 502: a status outside 100–599, a control byte in a header', async (t) => {
  const upstream = await startEchoUpstream(t)
  const answers = [
    'HTTP/1.1 999 Odd\r\ncontent-length: 2\r\n\r\n[]',
    'HTTP/1.1 200 OK\r\nx-bad: a\u0001b\r\ncontent-length: 2\r\n\r\n[]'
  ]
  let next = 0
  upstream.behave((req) => { req.socket.end(answers[next++] ?? '') })
  const gw = await startGateway(t, { backendUrl: upstream.url })
  for (const what of ['status 999', 'control byte']) {
    const res = await fetch(`${gw.url}/v1/pets`, { headers: KEY })
    t.equal(res.status, 502, what)
    t.same(await res.json(), { code: 'upstream_unavailable', message: 'The pet store service is unavailable', status: 502 })
  }
  const still = await fetch(`${gw.url}/v1/store/orders`, { headers: KEY })
  t.equal(still.status, 502, 'and the gateway is still up')
  await still.arrayBuffer()
})
