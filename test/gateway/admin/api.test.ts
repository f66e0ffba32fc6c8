import t from 'tap'
import { cpSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { startGateway } from '../../helpers/gateway.js'
import { ADMIN_JSON, bearer, DEMO_KEYS, FIXTURE_CONFIG_DIR, plansYaml, testConfig } from '../../helpers/config-fixture.js'

t.test('GET /admin/config says what is in force, never a digest', async (t) => {
  const gw = await startGateway(t)
  const res = await fetch(`${gw.adminUrl}/admin/config`)
  t.equal(res.status, 200)
  const text = await res.text()
  t.notMatch(text, /[0-9a-f]{64}/, 'no digest')
  const body = JSON.parse(text) as Record<string, unknown>
  t.same(body, {
    version: gw.app.gatewayConfig.current.version,
    loadedAt: new Date(gw.app.gatewayConfig.current.loadedAt).toISOString(),
    configDir: null,
    plans: { free: { perMinute: 60, perDay: 1000 }, pro: { perMinute: 300, perDay: 10000 }, business: { perMinute: 1000, perDay: 100000 }, enterprise: 'custom' },
    anonymous: { perMinute: 30, perDay: 300, ipv6Prefix: 64 },
    ban: { threshold: 30, windowSeconds: 60, durationSeconds: 900, maxDurationSeconds: 86400 },
    keys: { total: 4, disabled: 0, byPlan: { free: 1, pro: 1, business: 1, enterprise: 1 } },
    routes: 2,
    costs: {}
  })
})

t.test('POST /admin/reload applies a good config and refuses a bad one with its problems', async (t) => {
  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  const gw = await startGateway(t, { reload: { dir, watch: false } })
  const same = await fetch(`${gw.adminUrl}/admin/reload`, { method: 'POST', headers: ADMIN_JSON })
  t.equal(same.status, 200)
  t.same(await same.json(), { ok: true, changed: false, version: gw.app.gatewayConfig.current.version, keys: 4 })

  writeFileSync(join(dir, 'plans.yaml'), 'plans: {}\n')
  const bad = await fetch(`${gw.adminUrl}/admin/reload`, { method: 'POST', headers: ADMIN_JSON })
  t.equal(bad.status, 422)
  // An empty plans map names no plan, so every key's plan is unknown too: one run reports every problem.
  const problems = ['plans.yaml: missing field "anonymous"', 'plans.yaml: plans: must NOT have fewer than 1 properties',
    ...['free', 'pro', 'business', 'enterprise'].map((plan, i) => `keys.yaml: keys[${i}].plan: unknown plan "${plan}"`)]
  t.same(await bad.json(), { code: 'config_rejected', message: problems.join('; '), status: 422, problems })
})

t.test('POST /admin/reload on a fixed config is refused', async (t) => {
  const gw = await startGateway(t)
  const res = await fetch(`${gw.adminUrl}/admin/reload`, { method: 'POST', headers: ADMIN_JSON })
  t.equal(res.status, 409)
  t.same(await res.json(), { code: 'reload_unavailable', message: 'This gateway runs on a fixed config, not a config directory', status: 409 })
})

t.test('bans: listed, lifted, and usage shows window counts', async (t) => {
  const plans = plansYaml({ free: { perMinute: 2, perDay: 100 }, ban: { threshold: 2 } })
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': plans }) })
  const statuses: number[] = []
  for (let i = 0; i < 6; i++) {
    const res = await fetch(`${gw.url}/v1/store/orders`, { headers: bearer(DEMO_KEYS.free) })
    statuses.push(res.status)
    await res.arrayBuffer()
  }
  t.same(statuses, [200, 200, 429, 429, 429, 429])

  const usage = await (await fetch(`${gw.adminUrl}/admin/keys/demo-free/usage`)).json() as Record<string, unknown>
  t.match(usage, { keyId: 'demo-free', plan: 'free', disabled: false, minute: { count: 2, limit: 2, remaining: 0 }, day: { count: 2, limit: 100, remaining: 98 } })
  t.type(usage.bannedUntil, 'string')

  const list = await (await fetch(`${gw.adminUrl}/admin/bans`)).json() as { bans: Array<{ keyId: string, secondsLeft: number }> }
  t.equal(list.bans.length, 1)
  t.equal(list.bans[0]?.keyId, 'demo-free')
  t.ok(list.bans[0]!.secondsLeft > 890 && list.bans[0]!.secondsLeft <= 900)

  const lifted = await fetch(`${gw.adminUrl}/admin/bans/demo-free`, { method: 'DELETE', headers: ADMIN_JSON })
  t.equal(lifted.status, 200)
  t.same(await lifted.json(), { keyId: 'demo-free', consumerId: 'demo-free', lifted: true })
  t.same(await (await fetch(`${gw.adminUrl}/admin/bans`)).json(), { bans: [] })
  const again = await fetch(`${gw.adminUrl}/admin/bans/demo-free`, { method: 'DELETE', headers: ADMIN_JSON })
  t.equal(again.status, 404)
  t.same(await again.json(), { code: 'not_found', message: 'Key demo-free is not banned', status: 404 })

  const unknown = await fetch(`${gw.adminUrl}/admin/keys/nobody/usage`)
  t.equal(unknown.status, 404)
  t.same(await unknown.json(), { code: 'not_found', message: 'No key with id nobody', status: 404 })
  const bad = await fetch(`${gw.adminUrl}/admin/keys/${encodeURIComponent('../etc')}/usage`)
  t.equal(bad.status, 400)
})

t.test('the admin API needs the admin token when one is set', async (t) => {
  const gw = await startGateway(t, { adminToken: 'tok-123' })
  for (const [method, path] of [['GET', '/admin/config'], ['POST', '/admin/reload'], ['GET', '/admin/bans'], ['DELETE', '/admin/bans/x'], ['GET', '/admin/keys/demo-pro/usage'], ['GET', '/metrics']]) {
    const res = await fetch(gw.adminUrl + path!, { method })
    t.equal(res.status, 401, `${method} ${path}`)
    await res.arrayBuffer()
  }
  const ok = await fetch(`${gw.adminUrl}/admin/config`, { headers: { authorization: 'Bearer tok-123' } })
  t.equal(ok.status, 200)
  await ok.arrayBuffer()
})
