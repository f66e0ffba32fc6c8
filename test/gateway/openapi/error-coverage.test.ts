// The served description lists every error the gateway answers: for each code of the catalogue the
// public port can answer, a real request makes the running gateway answer it, and the document that
// gateway serves must list that code under that status for the operation the request was routed to
// (or the request must match no operation at all: an unknown path, an unknown method). A code with
// no request here fails the test, so a new code cannot be added without its place in the document.
import { connect } from 'node:net'
import { OpenAPIBackend, type Document, type Operation } from 'openapi-backend'
import t, { type Test } from 'tap'
import { keyDigest } from '../../../src/gateway/auth/bearer.js'
import { ERROR_CODES, type ErrorCode } from '../../../src/interface/errors.js'
import { startEchoUpstream } from '../../helpers/echo-upstream.js'
import { startGateway, type StartedGateway } from '../../helpers/gateway.js'
import { bearer, configTexts, DEMO_KEYS, testConfig } from '../../helpers/config-fixture.js'
import { startRedis } from '../../helpers/redis.js'

const PRO = bearer(DEMO_KEYS.pro)
const EXPIRED = 'psk_error_coverage_expired_0123456789'
const READER = 'psk_error_coverage_reader_0123456789'
const TINY = 'psk_error_coverage_tiny_012345678901'
const QUOTA = 'psk_error_coverage_quota_01234567890'
const REQUEST_TIMEOUT_MS = 400

interface Answer { status: number, code: string | undefined }
interface Trigger {
  /** The request as the document would route it: method and path. */
  method: string
  path: string
  send: (gw: StartedGateway) => Promise<Answer>
}

async function answer (res: Response): Promise<Answer> {
  const text = await res.text()
  return { status: res.status, code: text.startsWith('{') ? (JSON.parse(text) as { code?: string }).code : undefined }
}

function http (method: string, path: string, headers: Record<string, string> = {}, body?: string): Trigger {
  return { method, path, send: async (gw) => await answer(await fetch(`${gw.url}${path}`, { method, headers, body })) }
}

function json (path: string, key: string, body: unknown): Trigger {
  return http('POST', path, { ...bearer(key), 'content-type': 'application/json' }, JSON.stringify(body))
}

/** Raw bytes over a socket, for what fetch will not send (two Authorization headers, 20 KB of headers, headers that never end). */
function raw (method: string, path: string, head: string, complete = true): Trigger {
  return {
    method,
    path,
    send: async (gw) => await new Promise<Answer>((resolve, reject) => {
      const socket = connect(Number(new URL(gw.url).port), '127.0.0.1')
      const chunks: Buffer[] = []
      socket.on('data', (c: Buffer) => chunks.push(c))
      socket.on('error', reject)
      socket.on('close', () => {
        const text = Buffer.concat(chunks).toString('latin1')
        const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0)
        const body = text.slice(text.indexOf('\r\n\r\n') + 4)
        resolve({ status, code: body.startsWith('{') ? (JSON.parse(body) as { code?: string }).code : undefined })
      })
      socket.write(`${method} ${path} HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\n${head}${complete ? '\r\n' : ''}`)
    })
  }
}

/** Gateway A: the real backend, a config with an expired key, a read-only key, a tiny plan that bans at once, a plan with a monthly quota of 1, a route past its sunset. */
async function configuredGateway (t: Test): Promise<StartedGateway> {
  const fixture = configTexts()
  return await startGateway(t, {
    config: testConfig({
      'plans.yaml': fixture['plans.yaml'].replace('\n# Requests without', '\n  tiny: { perMinute: 1, perDay: 1 }\n  quota: { perMinute: 1, perDay: 1, perMonth: 1 }\n# Requests without')
        .replace(/^ban: .*$/m, 'ban: { threshold: 1, windowSeconds: 60, durationSeconds: 60, maxDurationSeconds: 60 }'),
      'keys.yaml': fixture['keys.yaml'] +
        `  - { id: expired, sha256: ${keyDigest(EXPIRED)}, plan: pro, expiresAt: 2020-01-01 }\n` +
        `  - { id: reader, sha256: ${keyDigest(READER)}, plan: pro, scopes: [read] }\n` +
        `  - { id: tiny, sha256: ${keyDigest(TINY)}, plan: tiny }\n` +
        `  - { id: quota, sha256: ${keyDigest(QUOTA)}, plan: quota }\n`,
      'routes.yaml': fixture['routes.yaml'].replace('stability: experimental', 'deprecated: { since: 2019-01-01, sunset: 2020-01-01 }')
    }),
    serverLimits: { requestTimeoutMs: REQUEST_TIMEOUT_MS, headersTimeoutMs: REQUEST_TIMEOUT_MS, connectionsCheckingIntervalMs: 100 }
  })
}

const ON_CONFIGURED: Partial<Record<ErrorCode, Trigger>> = {
  invalid_body: json('/v1/pets', DEMO_KEYS.pro, { categoryId: 1 }),
  invalid_parameter: http('GET', '/v1/pets?limit=0', PRO),
  invalid_request: raw('GET', '/v1/pets', `Authorization: Bearer ${DEMO_KEYS.pro}\r\nAuthorization: Bearer ${DEMO_KEYS.free}\r\n`),
  unauthorized: http('GET', '/v1/pets'),
  key_expired: http('GET', '/v1/pets', bearer(EXPIRED)),
  insufficient_scope: json('/v1/pets', READER, { name: 'Rex', categoryId: 1 }),
  not_found: http('GET', '/v1/pets/999', PRO),
  route_not_found: http('GET', '/v1/nowhere', PRO),
  method_not_allowed: http('DELETE', '/v1/pets', PRO),
  request_timeout: raw('GET', '/v1/pets', `Authorization: Bearer ${DEMO_KEYS.pro}\r\n`, false),
  endpoint_removed: http('GET', '/v1/store/orders', PRO),
  payload_too_large: json('/v1/pets', DEMO_KEYS.pro, { name: 'x'.repeat(20_000), categoryId: 1 }),
  unsupported_media_type: http('POST', '/v1/pets', { ...PRO, 'content-type': 'text/plain' }, 'Rex'),
  headers_too_large: raw('GET', '/v1/pets', `Authorization: Bearer ${'A'.repeat(20 * 1024)}\r\n`)
}
// The tiny key: its first request is admitted, the second is over the limit, the third crosses the ban threshold.
const TINY_SEQUENCE: Array<[ErrorCode | 'ok', Trigger]> = [
  ['ok', http('GET', '/v1/pets', bearer(TINY))],
  ['rate_limited', http('GET', '/v1/pets', bearer(TINY))],
  ['key_banned', http('GET', '/v1/pets', bearer(TINY))]
]
// The quota key: its first request uses the month up, the second is quota_exceeded (the month is out, if the minute is too).
const QUOTA_SEQUENCE: Array<[ErrorCode | 'ok', Trigger]> = [
  ['ok', http('GET', '/v1/pets', bearer(QUOTA))],
  ['quota_exceeded', http('GET', '/v1/pets', bearer(QUOTA))]
]

/** Gateway B: an upstream that fails in each way, and a Redis store that answers 503 once Redis is gone. */
const ON_FAILING: Partial<Record<ErrorCode, Trigger>> = {
  internal_error: http('GET', '/v1/pets', PRO),
  upstream_timeout: http('GET', '/v1/store/orders', PRO),
  upstream_unavailable: http('GET', '/v1/pets/1', PRO)
}
// A key gateway B has not seen: the pro key's process may still hold units counted ahead of its
// requests (a busy consumer's block), and admit from them after Redis stops (a 500 from the upstream).
const AFTER_REDIS_STOPS: Partial<Record<ErrorCode, Trigger>> = { unavailable: http('GET', '/v1/pets', bearer(DEMO_KEYS.free)) }

async function servedApi (gw: StartedGateway): Promise<OpenAPIBackend> {
  const definition = await (await fetch(`${gw.url}/v1/openapi.json`)).json() as Document
  const api = new OpenAPIBackend({ definition, apiRoot: '/v1', validate: false, quick: true })
  await api.init()
  return api
}

/** Sends the trigger, checks the answer is the code with its catalogue status, and that the served document lists it. */
async function covered (t: Test, gw: StartedGateway, api: OpenAPIBackend, code: ErrorCode, trigger: Trigger): Promise<void> {
  const got = await trigger.send(gw)
  const label = `${code}: ${trigger.method} ${trigger.path.slice(0, 40)}`
  t.same(got, { status: ERROR_CODES[code].status, code }, `${label} → ${ERROR_CODES[code].status} ${code}`)
  const url = new URL(trigger.path, gw.url)
  const operation = api.matchOperation({ method: trigger.method.toLowerCase(), path: url.pathname, query: Object.fromEntries(url.searchParams), headers: {} }) as Operation | undefined
  if (code === 'route_not_found' || code === 'method_not_allowed') {
    t.equal(operation, undefined, `${label}: no operation of the document matches, so none can list it`)
    return
  }
  const responses = operation?.responses as Record<string, { content?: Record<string, { schema?: { allOf?: Array<{ properties?: { code?: { enum?: string[] } } }> } }> }> | undefined
  const listed = responses?.[String(got.status)]?.content?.['application/json']?.schema?.allOf?.[1]?.properties?.code?.enum ?? []
  t.ok(listed.includes(code), `${label}: the served document lists ${code} under ${got.status} for ${operation?.operationId ?? '(no operation)'} (lists ${listed.join(', ')})`)
}

t.test('every code the public port answers is listed in the served document, under its status, for the operation that answered it', async (t) => {
  const triggered = new Set<string>([...Object.keys(ON_CONFIGURED), ...[...TINY_SEQUENCE, ...QUOTA_SEQUENCE].map(([c]) => c), ...Object.keys(ON_FAILING), ...Object.keys(AFTER_REDIS_STOPS)])
  const publicCodes = (Object.entries(ERROR_CODES) as Array<[ErrorCode, { publicPort?: false }]>).filter(([, e]) => e.publicPort !== false).map(([c]) => c)
  t.same(publicCodes.filter((c) => !triggered.has(c)), [], 'every public code of the catalogue has a request here')

  const a = await configuredGateway(t)
  const apiA = await servedApi(a)
  for (const [code, trigger] of Object.entries(ON_CONFIGURED) as Array<[ErrorCode, Trigger]>) await covered(t, a, apiA, code, trigger)
  for (const [code, trigger] of [...TINY_SEQUENCE, ...QUOTA_SEQUENCE]) {
    if (code === 'ok') t.equal((await trigger.send(a)).status, 200, 'the key\'s first request is admitted')
    else await covered(t, a, apiA, code, trigger)
  }

  const upstream = await startEchoUpstream(t)
  const timers: NodeJS.Timeout[] = []
  t.teardown(() => { for (const timer of timers) clearTimeout(timer) })
  upstream.behave((req, res) => {
    if (req.url === '/v1/pets/1') {
      req.socket.destroy()
    } else if (req.url?.startsWith('/v1/store/orders') === true) {
      timers.push(setTimeout(() => res.end('[]'), 2_000))
    } else {
      // What the backend answers when it fails unexpectedly (its own error handler); the gateway passes it on.
      res.writeHead(500, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ code: 'internal_error', message: 'The server could not complete the request', status: 500 }))
    }
  })
  const redis = await startRedis(t)
  const b = await startGateway(t, { backendUrl: upstream.url, upstreamTimeoutMs: 300, limiter: { settings: { redisUrl: redis.url, storeOnError: 'closed' } } })
  const apiB = await servedApi(b)
  for (const [code, trigger] of Object.entries(ON_FAILING) as Array<[ErrorCode, Trigger]>) await covered(t, b, apiB, code, trigger)
  await redis.stop()
  for (const [code, trigger] of Object.entries(AFTER_REDIS_STOPS) as Array<[ErrorCode, Trigger]>) await covered(t, b, apiB, code, trigger)
})
