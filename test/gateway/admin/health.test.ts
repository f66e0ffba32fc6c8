import t from 'tap'
import { startGateway } from '../../helpers/gateway.js'
import { startBackend } from '../../helpers/backend.js'

t.test('/healthz is alive; /readyz reports each check and flips when draining', async (t) => {
  const gw = await startGateway(t)
  const health = await fetch(`${gw.adminUrl}/healthz`)
  t.equal(health.status, 200)
  t.same(await health.json(), { status: 'ok' })

  const ready = await fetch(`${gw.adminUrl}/readyz`)
  t.equal(ready.status, 200)
  const body = await ready.json() as { status: string, checks: Record<string, { ok: boolean }> }
  t.equal(body.status, 'ready')
  t.same(body.checks.draining, { ok: true })
  t.same(body.checks.backend, { ok: true })

  gw.readiness.drain()
  const draining = await fetch(`${gw.adminUrl}/readyz`)
  t.equal(draining.status, 503)
  t.match(await draining.json(), { status: 'not_ready', checks: { draining: { ok: false, error: 'shutting down' } } })
})

t.test('a check that never answers fails readiness instead of hanging it', async (t) => {
  const gw = await startGateway(t)
  gw.readiness.register('stuck', () => new Promise(() => {}))
  const res = await fetch(`${gw.adminUrl}/readyz`)
  t.equal(res.status, 503)
  t.match(await res.json(), { checks: { stuck: { ok: false, error: 'no answer within 1000 ms' } } })
})

t.test('the backend check fails while the backend is down', async (t) => {
  // A real backend, stopped once the gateway holds its own ports: a port picked as "free" beforehand
  // could be handed to the gateway's own listeners and answer the probe.
  const backend = await startBackend(t)
  const gw = await startGateway(t, { backendUrl: backend.url })
  t.equal((await fetch(`${gw.adminUrl}/readyz`)).status, 200, 'ready while the backend runs')
  await backend.close()
  const res = await fetch(`${gw.adminUrl}/readyz`)
  t.equal(res.status, 503)
  t.match(await res.json(), { checks: { backend: { ok: false, error: /ECONNREFUSED/ } } })
})

t.test('with ADMIN_TOKEN set, admin requests need it (except the probes /healthz and /readyz)', async (t) => {
  const gw = await startGateway(t, { adminToken: 's3cret-admin-token' })
  t.equal((await fetch(`${gw.adminUrl}/healthz`)).status, 200)
  t.equal((await fetch(`${gw.adminUrl}/readyz`)).status, 200)
  const denied = await fetch(`${gw.adminUrl}/admin/config`)
  t.equal(denied.status, 401)
  t.same(await denied.json(), { code: 'unauthorized', message: 'Admin token required', status: 401 })
  const wrong = await fetch(`${gw.adminUrl}/admin/config`, { headers: { authorization: 'Bearer nope' } })
  t.equal(wrong.status, 401)
  const ok = await fetch(`${gw.adminUrl}/admin/config`, { headers: { authorization: 'Bearer s3cret-admin-token' } })
  t.equal(ok.status, 200)
})

t.test('the public port does not serve admin routes', async (t) => {
  const gw = await startGateway(t)
  for (const path of ['/healthz', '/readyz', '/metrics']) {
    const res = await fetch(gw.url + path, { headers: { authorization: 'Bearer psk_demo_pro_uenUZBiCRIjwMQludQiJmPup' } })
    t.equal(res.status, 404, path)
    await res.arrayBuffer()
  }
})
