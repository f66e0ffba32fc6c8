import { createHash } from 'node:crypto'
import t from 'tap'
import { startEchoUpstream } from '../../helpers/echo-upstream.js'
import { startGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS, FIXTURE_CONFIG_DIR } from '../../helpers/config-fixture.js'
import { freePort } from '../../helpers/ports.js'
import { runEntry, waitForProcessHttp } from '../../helpers/processes.js'
import { LOG_REDACT_PATHS } from '../../../src/gateway/observability/request-log.js'
import { EVENT_TIMEOUT_MS, poll } from '../../helpers/poll.js'

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex')

t.test('one JSON line per request: request id, key id, plan, route pattern, status, duration, upstream duration', async (t) => {
  const gw = await startGateway(t)
  const ok = await fetch(`${gw.url}/v1/pets/42`, { headers: bearer(DEMO_KEYS.business) })
  await ok.arrayBuffer()
  const denied = await fetch(`${gw.url}/v1/pets`)
  await denied.arrayBuffer()

  const lines = gw.logs.filter((l) => l.msg === 'request')
  t.equal(lines.length, 2, 'exactly one line per request')
  const [first, second] = lines
  t.match(first, {
    level: 30,
    reqId: ok.headers.get('x-request-id'),
    keyId: 'demo-business',
    plan: 'business',
    method: 'GET',
    route: '/v1/pets/:petId',
    status: 404,
    durationMs: Number,
    upstreamMs: Number,
    deprecated: true
  })
  t.ok((first?.upstreamMs as number) <= (first?.durationMs as number), 'upstream time is part of the request time')
  t.match(second, { reqId: denied.headers.get('x-request-id'), keyId: null, plan: 'anonymous', route: '/v1/pets', status: 401, upstreamMs: null })
  t.notOk('deprecated' in (second ?? {}))
})

t.test('no key material in any log line, at trace level, for valid, invalid and failing requests', async (t) => {
  const upstream = await startEchoUpstream(t)
  upstream.behave((_req, res) => { res.socket?.destroy() })
  const gw = await startGateway(t, { backendUrl: upstream.url, logLevel: 'trace' })
  const secrets = [DEMO_KEYS.pro, 'psk_not_a_real_key_zzzzzzzzzzzzzzzzzzzz']

  const proxied = await fetch(`${gw.url}/v1/pets`, { headers: bearer(DEMO_KEYS.pro) })
  t.equal(proxied.status, 502)
  await proxied.arrayBuffer()
  const invalid = await fetch(`${gw.url}/v1/pets`, { headers: bearer(secrets[1] ?? '') })
  t.equal(invalid.status, 401)
  await invalid.arrayBuffer()
  const proxyAuth = await fetch(`${gw.url}/v1/pets`, { headers: { ...bearer(DEMO_KEYS.pro), 'proxy-authorization': `Basic ${DEMO_KEYS.pro}` } })
  await proxyAuth.arrayBuffer()
  // A module that logs the headers by mistake still leaks nothing.
  gw.app.log.error({ req: { headers: { authorization: `Bearer ${DEMO_KEYS.pro}` } }, headers: { authorization: `Bearer ${DEMO_KEYS.pro}` } }, 'headers logged by mistake')

  const raw = gw.rawLogs()
  t.ok(gw.logs.some((l) => (l.level as number) >= 40 && l.reqId !== undefined), 'the upstream failure was logged at warn or above')
  t.ok(gw.logs.some((l) => l.msg === 'headers logged by mistake' && JSON.stringify(l).includes('[Redacted]')), 'logged headers are censored')
  for (const secret of secrets) {
    t.notOk(raw.includes(secret), 'the key is in no log line')
    t.notOk(raw.includes(sha256(secret)), 'nor its digest')
    t.notOk(raw.includes(secret.slice(-12)), 'nor a fragment of it')
  }
  t.notOk(raw.toLowerCase().includes('bearer '), 'no Authorization value at all')
})

t.test('the process logs start-up and config once, at the level LOG_LEVEL sets', async (t) => {
  const base = async (): Promise<Record<string, string>> => ({
    GATEWAY_HOST: '127.0.0.1',
    GATEWAY_PORT: String(await freePort()),
    ADMIN_PORT: String(await freePort()),
    BACKEND_URL: `http://127.0.0.1:${await freePort()}`,
    CONFIG_DIR: FIXTURE_CONFIG_DIR
  })
  const infoEnv = await base()
  const warnEnv = await base()
  const info = runEntry(t, 'src/gateway/server.ts', { ...infoEnv, LOG_LEVEL: 'info' })
  const warn = runEntry(t, 'src/gateway/server.ts', { ...warnEnv, LOG_LEVEL: 'warn' })
  await waitForProcessHttp(info, `http://127.0.0.1:${infoEnv.ADMIN_PORT}/healthz`)
  await waitForProcessHttp(warn, `http://127.0.0.1:${warnEnv.ADMIN_PORT}/healthz`)
  await poll(() => info.output().includes('"msg":"gateway listening"'), EVENT_TIMEOUT_MS, 20)
  // One request through each: the entry's logger writes the request line itself (request-line.ts), at info only.
  const sent = Date.now()
  const answers = await Promise.all([infoEnv, warnEnv].map(async (env) => {
    const res = await fetch(`http://127.0.0.1:${env.GATEWAY_PORT ?? ''}/v1/pets`, { headers: bearer(DEMO_KEYS.pro) })
    await res.arrayBuffer()
    return res
  }))
  await poll(() => info.output().includes('"msg":"request"'), EVENT_TIMEOUT_MS, 20)
  const requestLines = info.output().trim().split('\n').filter((line) => line.includes('"msg":"request"')).map((line) => JSON.parse(line) as Record<string, unknown>)
  t.equal(requestLines.length, 1, 'one request line')
  t.match(requestLines[0], {
    level: 30,
    service: 'gateway',
    pid: info.child.pid,
    reqId: answers[0]?.headers.get('x-request-id'),
    keyId: 'demo-pro',
    plan: 'pro',
    method: 'GET',
    route: '/v1/pets',
    status: answers[0]?.status,
    durationMs: Number,
    rateLimit: { outcome: 'ok', policy: 'pro', remaining: Number },
    msg: 'request'
  })
  t.ok((requestLines[0]?.time as number) >= sent - 1000 && (requestLines[0]?.time as number) <= Date.now(), 'its time is the clock\'s, in ms')
  // The writer does not redact: the line must carry no field that pino's redaction would have censored.
  const redactedFields = new Set(LOG_REDACT_PATHS.map((path) => path.split(/[.[]/)[0]))
  t.same(Object.keys(requestLines[0] ?? {}).filter((name) => redactedFields.has(name)), [], 'no field of the line is one pino redacts')
  const count = (text: string, msg: string): number => text.split(`"msg":"${msg}"`).length - 1
  const infoOut = info.output()
  t.equal(count(infoOut, 'config loaded'), 1)
  t.equal(count(infoOut, 'endpoint lifecycle rules'), 1)
  t.equal(count(infoOut, 'gateway listening'), 1)
  for (const line of infoOut.trim().split('\n')) t.doesNotThrow(() => JSON.parse(line), 'every line is JSON')
  info.child.kill('SIGTERM')
  warn.child.kill('SIGTERM')
  await info.exited
  await warn.exited
  t.equal(warn.output().includes('"level":30'), false, 'LOG_LEVEL=warn: no info lines, the request line neither')
})
