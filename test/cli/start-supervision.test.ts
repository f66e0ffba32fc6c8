// `npm start` supervises its two children, under the real npm: a backend killed by its PID is
// restarted while the gateway answers 502 upstream_unavailable, then 200 again (data intact); a
// killed gateway is restarted; a child that crashes in a loop (its port held by another program)
// stops the launcher with one line and exit 1; a stop signal during a restart wait ends everything
// and restarts nothing. The stop signals themselves are test/cli/start.test.ts's.
import { createServer, type AddressInfo } from 'node:net'
import t from 'tap'
import { DEMO_KEYS } from '../helpers/config-fixture.js'
import { alive, bound, childRunning, npmStart, spawnNpmStart } from '../helpers/npm-start.js'
import { until } from '../helpers/poll.js'
import { PROCESS_START_TIMEOUT_MS } from '../helpers/ports.js'

const AUTH = { authorization: `Bearer ${DEMO_KEYS.enterprise}` }

async function get (url: string): Promise<{ status: number, body: unknown, headers: Headers } | undefined> {
  try {
    const res = await fetch(url, { headers: AUTH })
    return { status: res.status, body: await res.json(), headers: res.headers }
  } catch {
    return undefined // connection refused: nothing listens
  }
}

// One `npm start` (four processes) for both kills: the backend's restart, then the gateway's, then
// the stop order with two restarted children.
t.test('a backend killed by PID is restarted (502 upstream_unavailable meanwhile, then 200 with its data); a killed gateway is restarted and the backend left alone', async (t) => {
  const s = await npmStart(t)
  const created = await fetch(`${s.base}/v1/pets`, { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body: '{"name":"Rex","categoryId":1}' })
  t.equal(created.status, 201)
  await created.arrayBuffer()

  process.kill(s.backend, 'SIGKILL')
  const down = await until('a 502', async () => { const r = await get(`${s.base}/v1/pets`); return r?.status === 502 ? r : undefined }, 30_000, 10)
  t.strictSame(down.body, { code: 'upstream_unavailable', message: 'The pet store service is unavailable', status: 502 })
  t.equal(down.headers.get('x-ratelimit-limit'), '5000', 'still limited and counted while the backend is down')

  const back = await until('200 again', async () => { const r = await get(`${s.base}/v1/pets`); return r?.status === 200 ? r : undefined }, PROCESS_START_TIMEOUT_MS, 50)
  t.strictSame(back.body, [{ id: 1, name: 'Rex', categoryId: 1, status: 'available' }], 'the restarted backend serves the same database')
  const backend = childRunning(s.launcher, 'backend/server')
  t.ok(backend !== undefined && backend !== s.backend, `a new backend process (${backend ?? 'none'}, was ${s.backend})`)
  if (backend !== undefined) s.track(backend)
  t.ok(alive(s.gateway) && alive(s.launcher), 'the gateway and the launcher stayed up')
  t.match(s.output(), 'backend exited (SIGKILL); restarting it in 250 ms')
  t.match(s.output(), `backend restarted (pid ${backend ?? 0})`)

  // Now the gateway: restarted, and the (restarted) backend left alone.
  process.kill(s.gateway, 'SIGKILL')
  const gatewayBack = await until('200 again from a new gateway', async () => {
    if (childRunning(s.launcher, 'gateway/server') === s.gateway) return undefined
    const r = await get(`${s.base}/v1/store/orders`)
    return r?.status === 200 ? r : undefined
  }, PROCESS_START_TIMEOUT_MS, 50)
  t.strictSame(gatewayBack.body, [])
  const gateway = childRunning(s.launcher, 'gateway/server')
  t.ok(gateway !== undefined && gateway !== s.gateway, 'a new gateway process')
  if (gateway !== undefined) s.track(gateway)
  t.equal(childRunning(s.launcher, 'backend/server'), backend, 'the same backend process')
  t.match(s.output(), 'gateway exited (SIGKILL); restarting it in 250 ms')
  process.kill(s.launcher, 'SIGHUP')
  await until('a reload of the restarted gateway', () => /"trigger":"SIGHUP"/.test(s.output()), 30_000)
  t.pass('SIGHUP reaches the restarted gateway')

  // The stop order still holds with both children restarted.
  process.kill(s.launcher, 'SIGTERM')
  t.same(await s.exited, { code: 0, signal: null })
  t.notOk([s.launcher, s.gateway, backend ?? 0, gateway ?? 0].some(alive), 'every process is gone')
  const out = s.output()
  t.ok(out.lastIndexOf('"msg":"stopped"') < out.lastIndexOf('"msg":"backend stopping"'), 'the gateway stopped before the backend')
})

t.test('a backend that crashes in a loop stops the launcher with one line, and exit 1', async (t) => {
  // Another program holds the backend's port: every start fails the same way, which no restart fixes.
  const blocker = createServer()
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve))
  t.teardown(() => blocker.close())
  const port = String((blocker.address() as AddressInfo).port)
  const s = await spawnNpmStart(t, { BACKEND_PORT: port })
  // The deadline's timer is unref'd: once the launcher exits, it must not hold the file open for minutes.
  const { code } = await Promise.race([s.exited, new Promise<{ code: string }>((resolve) => setTimeout(() => resolve({ code: 'still running' }), 2 * PROCESS_START_TIMEOUT_MS).unref())])
  t.equal(code, 1)
  const out = s.output()
  t.match(out, /^backend exited 5 times within 60 s \(last: code 1\); not restarting it again: stopping$/m)
  t.same(out.match(/^backend exited \(code 1\); restarting it in \d+ ms$/gm)?.map((l) => Number(/(\d+) ms$/.exec(l)?.[1])), [250, 500, 1000, 2000],
    'four restarts, each waiting twice as long')
  t.equal(out.split(`port ${port} is in use (BACKEND_PORT)`).length - 1, 5, 'each attempt said why it failed')
  t.notOk(alive(s.launcher), 'the launcher is gone')
  for (const p of [s.env.GATEWAY_PORT, s.env.ADMIN_PORT]) t.notOk(await bound(p ?? ''), `the gateway was stopped: port ${p} is free`)
})

t.test('a stop signal while a restart is pending stops everything and restarts nothing', async (t) => {
  const blocker = createServer()
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve))
  t.teardown(() => blocker.close())
  const s = await spawnNpmStart(t, { BACKEND_PORT: String((blocker.address() as AddressInfo).port) })
  await until('the first restart wait', () => s.output().includes('backend exited (code 1); restarting it in 250 ms'), PROCESS_START_TIMEOUT_MS, 10)
  await until('the gateway', () => childRunning(s.launcher, 'gateway/server'), PROCESS_START_TIMEOUT_MS)
  process.kill(s.launcher, 'SIGTERM')
  const signalledAt = Date.now()
  // Stopped at all is the check (a hang detector: 10 s was missed at load 26 with a CPU hog, by a
  // stop that came); what shows no restart was waited out is the output below, an order of lines.
  const stopped = await Promise.race([s.exited.then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), PROCESS_START_TIMEOUT_MS).unref())])
  t.ok(stopped, `stopped after the signal: ${Date.now() - signalledAt} ms (SHUTDOWN_GRACE_MS ${s.env.SHUTDOWN_GRACE_MS})`)
  const after = s.output().slice(s.output().indexOf('SIGTERM: stopping'))
  t.notMatch(after, /restarting it in|restarted \(pid/, 'nothing restarted after the signal')
  t.notMatch(s.output(), 'not restarting it again', 'no crash loop was declared')
  for (const p of [s.env.GATEWAY_PORT, s.env.ADMIN_PORT]) t.notOk(await bound(p ?? ''), `port ${p} is free`)
})
