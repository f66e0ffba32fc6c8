// Malformed requests are accounted like any other: URLs Fastify's router rejects before any hook
// (bad percent-encoding, over-long path parameters), bad JSON and doubled Authorization headers are
// counted against the key or the client address, carry the rate-limit headers, are limited (429)
// and banned, and appear in the request log and in gateway_requests_total{route="unmatched"}.
// Underscore twins of the gateway's identity headers never reach the backend.
import { connect } from 'node:net'
import t from 'tap'
import { startEchoUpstream } from '../../helpers/echo-upstream.js'
import { startGateway, type StartedGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS, plansYaml, testConfig } from '../../helpers/config-fixture.js'
import { sampleValue, scrape } from '../../helpers/scrape.js'
import { DEFAULT_MAX_JSON_DEPTH } from '../../../src/gateway/edge/limits.js'

const ANONYMOUS_PER_MINUTE = 6
const FREE_PER_MINUTE = 4
const config = testConfig({
  'plans.yaml': plansYaml({
    anonymous: { perMinute: ANONYMOUS_PER_MINUTE, perDay: 1000 },
    free: { perMinute: FREE_PER_MINUTE, perDay: 1000 },
    ban: { threshold: 3, windowSeconds: 60, durationSeconds: 60, maxDurationSeconds: 120 }
  })
})
const LONG_ID = '9'.repeat(101)
const MALFORMED = ['/v1/pets/%zz', `/v1/pets/${LONG_ID}`, '/v1/%E0%A4%A', `/v1/pets/${LONG_ID}?limit=1`]

interface Answer { status: number, headers: Record<string, string>, body: Record<string, unknown> }

/** One raw HTTP/1.1 request over its own socket: nothing between the test and the gateway cleans it up. */
async function raw (gw: StartedGateway, lines: string[], body = ''): Promise<Answer> {
  const { port } = new URL(gw.url)
  return await new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1')
    let text = ''
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => { text += chunk })
    socket.on('error', reject)
    socket.on('end', () => {
      const [head = '', payload = ''] = text.split('\r\n\r\n')
      const [statusLine = '', ...headerLines] = head.split('\r\n')
      const headers: Record<string, string> = {}
      for (const line of headerLines) {
        const at = line.indexOf(':')
        headers[line.slice(0, at).toLowerCase()] = line.slice(at + 1).trim()
      }
      const json = headers['transfer-encoding'] === 'chunked' ? dechunk(payload) : payload
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: JSON.parse(json) as Record<string, unknown> })
    })
    socket.write([...lines, 'host: gateway', 'connection: close', `content-length: ${Buffer.byteLength(body)}`, '', body].join('\r\n'))
  })
}

function dechunk (payload: string): string {
  let out = ''
  let at = 0
  for (;;) {
    const eol = payload.indexOf('\r\n', at)
    const size = parseInt(payload.slice(at, eol), 16)
    if (!(size > 0)) return out
    out += payload.slice(eol + 2, eol + 2 + size)
    at = eol + 2 + size + 2
  }
}

function requestLines (gw: StartedGateway): Array<Record<string, unknown>> {
  return gw.logs.filter((l) => l.msg === 'request')
}

t.test('URLs the router rejects are counted, limited and logged like any anonymous request', async (t) => {
  const gw = await startGateway(t, { config })
  const remaining: number[] = []
  for (let i = 0; i < ANONYMOUS_PER_MINUTE; i++) {
    const path = MALFORMED[i % MALFORMED.length] ?? ''
    const res = await raw(gw, [`GET ${path} HTTP/1.1`])
    t.equal(res.status, 400, `${path}: 400`)
    t.strictSame(res.body, { code: 'invalid_parameter', message: path.includes(LONG_ID) ? 'A path parameter is longer than the limit' : 'The URL is not valid', status: 400 })
    t.equal(res.headers['x-ratelimit-limit'], String(ANONYMOUS_PER_MINUTE))
    t.match(res.headers['ratelimit-policy'], `"minute";q=${ANONYMOUS_PER_MINUTE};w=60`)
    t.match(res.headers.ratelimit, /^"minute";r=\d+;t=\d+$/)
    t.match(res.headers['x-request-id'], /^[0-9a-f-]{36}$/)
    remaining.push(Number(res.headers['x-ratelimit-remaining']))
  }
  t.strictSame(remaining, [5, 4, 3, 2, 1, 0], 'each malformed request consumed one request of the anonymous window')

  const limited = await raw(gw, ['GET /v1/pets/%zz HTTP/1.1'])
  t.equal(limited.status, 429, 'past the anonymous limit, malformed URLs are 429 like everything else')
  t.equal(limited.body.code, 'rate_limited')
  t.ok(Number(limited.headers['retry-after']) >= 1)

  const lines = requestLines(gw)
  t.equal(lines.length, ANONYMOUS_PER_MINUTE + 1, 'one request-log line per malformed request')
  t.ok(lines.every((l) => l.route === 'unmatched' && l.plan === 'anonymous'))
  t.strictSame(lines.map((l) => l.status), [400, 400, 400, 400, 400, 400, 429])
  t.strictSame(lines.map((l) => (l.rateLimit as { remaining: number }).remaining), [5, 4, 3, 2, 1, 0, 0])

  const { samples } = await scrape(gw.adminUrl)
  t.equal(sampleValue(samples, 'gateway_requests_total', { route: 'unmatched', method: 'GET', status: '400', plan: 'anonymous' }), ANONYMOUS_PER_MINUTE)
  t.equal(sampleValue(samples, 'gateway_requests_total', { route: 'unmatched', method: 'GET', status: '429', plan: 'anonymous' }), 1)
  t.equal(sampleValue(samples, 'gateway_ratelimit_rejections_total', { plan: 'anonymous', window: 'minute' }), 1)
})

t.test('malformed URLs with a key are counted against the key, limited, then banned', async (t) => {
  const gw = await startGateway(t, { config })
  const statuses: number[] = []
  const codes: unknown[] = []
  for (let i = 0; i < FREE_PER_MINUTE + 4 + 1; i++) {
    const res = await raw(gw, [`GET ${MALFORMED[i % MALFORMED.length] ?? ''} HTTP/1.1`, `authorization: Bearer ${DEMO_KEYS.free}`])
    statuses.push(res.status)
    codes.push(res.body.code)
    t.equal(res.headers['x-ratelimit-limit'], String(FREE_PER_MINUTE), 'the key\'s policy, not the anonymous one')
  }
  // 4 admitted (400), then 429s; the 4th 429 is more than ban.threshold (3): banned, and stays banned.
  t.strictSame(statuses, [400, 400, 400, 400, 429, 429, 429, 429, 429])
  t.strictSame(codes.slice(4), ['rate_limited', 'rate_limited', 'rate_limited', 'key_banned', 'key_banned'])
  const valid = await fetch(`${gw.url}/v1/pets`, { headers: bearer(DEMO_KEYS.free) })
  t.equal(valid.status, 429, 'the ban applies to well-formed requests of the key too')
  t.equal(((await valid.json()) as { code: string }).code, 'key_banned')
  const { samples } = await scrape(gw.adminUrl)
  t.equal(sampleValue(samples, 'gateway_bans_total', { plan: 'free' }), 1)
  t.equal(sampleValue(samples, 'gateway_requests_total', { route: 'unmatched', method: 'GET', status: '400', plan: 'free' }), FREE_PER_MINUTE)
})

t.test('bad JSON is counted against the key and logged on its route', async (t) => {
  const gw = await startGateway(t, { config })
  const res = await raw(gw, ['POST /v1/pets HTTP/1.1', `authorization: Bearer ${DEMO_KEYS.free}`, 'content-type: application/json'], '{"name": ')
  t.equal(res.status, 400)
  t.strictSame(res.body, { code: 'invalid_body', message: 'Request body is not valid JSON', status: 400 }, 'said once, in one sentence')
  t.equal(res.headers['x-ratelimit-remaining'], String(FREE_PER_MINUTE - 1))
  t.match(res.headers['ratelimit-policy'], `"minute";q=${FREE_PER_MINUTE}`)
  t.match(requestLines(gw), [{ route: '/v1/pets', status: 400, keyId: 'demo-free' }])
  const headers = ['POST /v1/pets HTTP/1.1', `authorization: Bearer ${DEMO_KEYS.free}`, 'content-type: application/json']
  t.strictSame((await raw(gw, headers, '')).body,
    { code: 'invalid_body', message: 'Request body is empty but content-type is application/json', status: 400 })
  t.strictSame((await raw(gw, headers, '{"a":'.repeat(40) + '1' + '}'.repeat(40))).body,
    { code: 'invalid_body', message: `Request body JSON is nested deeper than ${DEFAULT_MAX_JSON_DEPTH} levels`, status: 400 })
})

t.test('two Authorization headers are 400 invalid_request, counted against the client address', async (t) => {
  const gw = await startGateway(t, { config })
  for (const second of [`Bearer ${DEMO_KEYS.pro}`, `Bearer ${DEMO_KEYS.free}`, 'Basic dXNlcjpwYXNz']) {
    const res = await raw(gw, ['GET /v1/pets HTTP/1.1', `Authorization: Bearer ${DEMO_KEYS.free}`, `aUtHoRiZaTiOn: ${second}`])
    t.equal(res.status, 400)
    t.strictSame(res.body, { code: 'invalid_request', message: 'Send exactly one Authorization header', status: 400 })
    t.equal(res.headers['x-ratelimit-limit'], String(ANONYMOUS_PER_MINUTE), 'neither credential is used: the anonymous policy')
  }
  t.ok(requestLines(gw).every((l) => l.keyId === null && l.status === 400))
  const one = await raw(gw, ['GET /v1/pets HTTP/1.1', `Authorization: Bearer ${DEMO_KEYS.free}`])
  t.equal(one.status, 200, 'one Authorization header is fine')
  t.equal(one.headers['x-ratelimit-remaining'], String(FREE_PER_MINUTE - 1), 'the key\'s window was untouched by the refused requests')
  const anonymous = await raw(gw, ['GET /v1/pets HTTP/1.1'])
  t.equal(anonymous.headers['x-ratelimit-remaining'], String(ANONYMOUS_PER_MINUTE - 4), 'the three refused requests used the client address\'s window')
  const both = await raw(gw, ['GET /v1/pets/%zz HTTP/1.1', `Authorization: Bearer ${DEMO_KEYS.free}`, `Authorization: Bearer ${DEMO_KEYS.free}`])
  t.equal(both.body.code, 'invalid_request', 'a doubled credential is refused even on a malformed URL')
  t.equal(both.headers['x-ratelimit-remaining'], String(ANONYMOUS_PER_MINUTE - 5), 'and is counted against the client address')
})

t.test('underscore twins of gateway-owned headers never reach the backend', async (t) => {
  const upstream = await startEchoUpstream(t)
  const gw = await startGateway(t, { config, backendUrl: upstream.url })
  const res = await raw(gw, [
    'GET /v1/pets HTTP/1.1',
    `authorization: Bearer ${DEMO_KEYS.free}`,
    'X_Consumer_Id: admin2',
    'x_consumer_plan: enterprise',
    'X-Consumer_Plan: enterprise',
    'x_request_id: forged',
    'Proxy_Authorization: Bearer x',
    'x_custom_header: kept'
  ])
  t.equal(res.status, 200)
  const seen = upstream.received[0]?.headers ?? {}
  t.equal(seen['x-consumer-id'], 'demo-free')
  t.equal(seen['x-consumer-plan'], 'free')
  t.match(seen['x-request-id'], /^[0-9a-f-]{36}$/)
  const twins = Object.keys(seen).filter((name) => name !== name.replaceAll('_', '-') && ['x-consumer-id', 'x-consumer-plan', 'x-request-id', 'proxy-authorization'].includes(name.replaceAll('_', '-')))
  t.strictSame(twins, [], 'no twin of a gateway-owned header was forwarded')
  t.equal(seen['x_custom_header'], 'kept', 'other underscore headers pass through')
})
