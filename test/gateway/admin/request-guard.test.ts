// The admin port against a browser on the same machine. The attacks: without ADMIN_TOKEN, a page
// posted a cross-origin "simple" request (`Origin: http://evil.example`, text/plain) to
// /admin/consumers/:id/reset and /admin/reload and it succeeded; and a page whose name was rebound
// to 127.0.0.1 (its Host header is its own name) could read and call the admin API. Now the Host
// must be loopback or listed (ADMIN_HOSTS), and a state-changing request must come from no other
// origin and be application/json; both are 403 `forbidden`. Real HTTP (node:http, which lets a test
// write Host and Origin as a browser or a rebinding page would).
import { request as httpRequest } from 'node:http'
import t, { type Test } from 'tap'
import { parseAdminHosts } from '../../../src/gateway/admin/request-guard.js'
import { settingsFromEnv } from '../../../src/gateway/runtime/settings.js'
import { startGateway, type StartedGateway } from '../../helpers/gateway.js'
import { ADMIN_JSON, bearer, DEMO_KEYS, plansYaml, testConfig } from '../../helpers/config-fixture.js'

interface Answer { status: number, body: Record<string, unknown> }

async function call (gw: StartedGateway, method: string, path: string, headers: Record<string, string> = {}, body = ''): Promise<Answer> {
  const url = new URL(gw.adminUrl)
  return await new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, method, path, headers: { host: url.host, ...headers } }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => { text += chunk })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text === '' ? {} : JSON.parse(text) as Record<string, unknown> }))
    })
    req.on('error', reject)
    req.end(body)
  })
}

const FORBIDDEN = { code: 'forbidden', status: 403 }
const banPlans = plansYaml({ free: { perMinute: 1, perDay: 100 }, ban: { threshold: 1 } })

async function bannedGateway (t: Test, adminHosts?: readonly string[]): Promise<StartedGateway> {
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': banPlans }), ...(adminHosts === undefined ? {} : { adminHosts }) })
  for (let i = 0; i < 3; i++) await (await fetch(`${gw.url}/v1/pets`, { headers: bearer(DEMO_KEYS.free) })).arrayBuffer()
  return gw
}

async function banOf (gw: StartedGateway): Promise<unknown> {
  return ((await call(gw, 'GET', '/admin/consumers/demo-free')).body.ban as { until: unknown }).until
}

t.test('a cross-origin simple POST cannot reset a consumer or reload the config', async (t) => {
  const gw = await bannedGateway(t)
  const banned = await banOf(gw)
  t.type(banned, 'string', 'demo-free is banned')
  const evil = { origin: 'http://evil.example', 'content-type': 'text/plain;charset=UTF-8' }
  t.match(await call(gw, 'POST', '/admin/consumers/demo-free/reset', evil, '{}'), { status: 403, body: { ...FORBIDDEN, message: /Cross-origin/ } })
  t.match(await call(gw, 'POST', '/admin/reload', evil), { status: 403, body: FORBIDDEN })
  t.match(await call(gw, 'POST', '/admin/consumers/demo-free/reset', { origin: 'http://evil.example', ...ADMIN_JSON }), { status: 403, body: FORBIDDEN },
    'a foreign Origin is refused even with JSON (a preflight would have been refused by the browser anyway)')
  t.match(await call(gw, 'DELETE', '/admin/bans/demo-free', { origin: 'null', ...ADMIN_JSON }), { status: 403, body: FORBIDDEN }, 'Origin: null (sandboxed page, file:) is foreign')
  t.equal(await banOf(gw), banned, 'the ban is still in force')

  for (const contentType of [undefined, 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
    const headers: Record<string, string> = contentType === undefined ? {} : { 'content-type': contentType }
    t.match(await call(gw, 'DELETE', '/admin/bans/demo-free', headers), { status: 403, body: { ...FORBIDDEN, message: /Content-Type: application\/json/ } },
      `no Origin but ${contentType ?? 'no content type'}: refused`)
  }
  t.equal(await banOf(gw), banned)

  const sameOrigin = { origin: gw.adminUrl, 'content-type': 'application/json; charset=utf-8' }
  t.match(await call(gw, 'POST', '/admin/consumers/demo-free/reset', sameOrigin, '{}'), { status: 200, body: { reset: true } }, 'its own origin and JSON: done')
  t.equal(await banOf(gw), null)
  t.match(await call(gw, 'POST', '/admin/reload', ADMIN_JSON), { status: 409 }, 'JSON without an Origin (the CLI, curl) passes the guard; an empty body is no body')
  t.match(await call(gw, 'POST', '/admin/consumers/demo-free/reset', { ...ADMIN_JSON, origin: gw.adminUrl.replace('127.0.0.1', 'localhost') }), { status: 403 },
    'another origin on the same machine is still another origin')
})

t.test('a rebound name in Host is refused; loopback hosts and ADMIN_HOSTS are answered; probes answer any Host', async (t) => {
  const gw = await bannedGateway(t, ['gateway-1', '2001:db8::9'])
  const port = new URL(gw.adminUrl).port
  for (const host of [`evil.example:${port}`, 'evil.example', `localhost.evil.example:${port}`, `127.0.0.1.nip.io:${port}`, `[::2]:${port}`, `gateway-2:${port}`, `10.0.0.1:${port}`, 'local host', `127.0.0.1:${port}:1`]) {
    t.match(await call(gw, 'GET', '/admin/config', { host }), { status: 403, body: { ...FORBIDDEN, message: /ADMIN_HOSTS/ } }, `Host: ${host}`)
  }
  t.match(await call(gw, 'POST', '/admin/consumers/demo-free/reset', { host: `evil.example:${port}`, ...ADMIN_JSON }), { status: 403 }, 'a rebound page cannot reset either')
  t.type(await banOf(gw), 'string')
  for (const host of ['localhost', `localhost:${port}`, `LOCALHOST:${port}`, '127.0.0.1', `127.9.9.9:${port}`, `[::1]:${port}`, '[0:0::1]', `gateway-1:${port}`, 'Gateway-1', `[2001:db8:0::9]:${port}`]) {
    t.equal((await call(gw, 'GET', '/admin/config', { host })).status, 200, `Host: ${host}`)
  }
  for (const path of ['/healthz', '/readyz']) t.equal((await call(gw, 'GET', path, { host: `10.1.2.3:${port}` })).status, 200, `${path} for a kubelet's Host`)
  t.equal((await call(gw, 'GET', '/metrics', { host: `10.1.2.3:${port}` })).status, 403, '/metrics is not a probe')
})

t.test('the guard and ADMIN_TOKEN together: the token is asked first, the browser checks still apply with it', async (t) => {
  const gw = await startGateway(t, { adminToken: 'tok-9' })
  t.match(await call(gw, 'POST', '/admin/reload'), { status: 401 }, 'no token: 401 whatever else is wrong')
  t.match(await call(gw, 'POST', '/admin/reload', { authorization: 'Bearer tok-9', origin: 'http://evil.example', ...ADMIN_JSON }), { status: 403 })
  t.match(await call(gw, 'POST', '/admin/reload', { authorization: 'Bearer tok-9', ...ADMIN_JSON }), { status: 409 })
  t.match(await call(gw, 'GET', '/admin/config', { authorization: 'Bearer tok-9', host: 'evil.example' }), { status: 403 }, 'Host is checked before the token')
})

t.test('ADMIN_HOSTS: host names or addresses, nothing else', async (t) => {
  t.same(settingsFromEnv({}).adminHosts, [], 'default: loopback only')
  t.same(settingsFromEnv({ ADMIN_HOSTS: 'gateway-1, Admin.Example.com,10.0.0.7,[2001:db8::1],::1' }).adminHosts,
    ['gateway-1', 'admin.example.com', '10.0.0.7', '2001:db8:0:0:0:0:0:1', '0:0:0:0:0:0:0:1'])
  for (const bad of ['http://gateway-1', 'gateway-1:9091', 'a b', '*.example.com', 'fe80::1%eth0', '-x']) {
    t.throws(() => parseAdminHosts(bad), { message: `ADMIN_HOSTS: "${bad}" is not a host name or address (no scheme, no port)` }, bad)
  }
})
