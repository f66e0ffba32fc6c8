import t from 'tap'
import { DEMO_KEYS } from '../helpers/gateway.js'
import { freePort, waitForHttp } from '../helpers/ports.js'
import { runEntry } from '../helpers/processes.js'

t.test('npm start runs backend and gateway: all four routes behind auth within 5 s, SIGTERM stops both', async (t) => {
  const dir = t.testdir()
  const env = {
    GATEWAY_HOST: '127.0.0.1',
    GATEWAY_PORT: String(await freePort()),
    ADMIN_PORT: String(await freePort()),
    BACKEND_PORT: String(await freePort()),
    PETS_DB: `${dir}/pets.db`
  }
  const proc = runEntry(t, 'src/cli/start.ts', { ...env, BACKEND_URL: `http://127.0.0.1:${env.BACKEND_PORT}` })
  const base = `http://127.0.0.1:${env.GATEWAY_PORT}`
  const waited = await waitForHttp(`http://127.0.0.1:${env.ADMIN_PORT}/healthz`, 5000)
  t.ok(waited < 5000, `gateway answered after ${waited} ms`)
  await waitForHttp(`http://127.0.0.1:${env.BACKEND_PORT}/v1/pets`, 5000)

  const auth = { authorization: `Bearer ${DEMO_KEYS.pro}` }
  t.equal((await fetch(`${base}/v1/pets`)).status, 401)
  const created = await fetch(`${base}/v1/pets`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{"name":"Tom","categoryId":2,"status":"pending"}' })
  t.equal(created.status, 201)
  t.same(await created.json(), { id: 1, name: 'Tom', categoryId: 2, status: 'pending' })
  t.same(await (await fetch(`${base}/v1/pets`, { headers: auth })).json(), [{ id: 1, name: 'Tom', categoryId: 2, status: 'pending' }])
  t.same(await (await fetch(`${base}/v1/pets/1`, { headers: auth })).json(), { id: 1, name: 'Tom', categoryId: 2, status: 'pending' })
  t.same(await (await fetch(`${base}/v1/store/orders`, { headers: auth })).json(), [])

  proc.child.kill('SIGTERM')
  const { code } = await proc.exited
  t.equal(code, 0)
  await t.rejects(fetch(`${base}/v1/pets`), 'gateway is gone')
  await t.rejects(fetch(`http://127.0.0.1:${env.BACKEND_PORT}/v1/pets`), 'backend is gone')
})
