import t from 'tap'
import { cpSync, writeFileSync } from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import { join } from 'node:path'
import { DEMO_KEYS, FIXTURE_CONFIG_DIR } from '../helpers/config-fixture.js'
import { EVENT_TIMEOUT_MS, poll, sleep } from '../helpers/poll.js'
import { freePort } from '../helpers/ports.js'
import { gatewayProcessEnv, runEntry, waitForProcessHttp } from '../helpers/processes.js'

/** A gateway on free ports in front of a backend port nothing listens on. */
async function gatewayEnv (configDir: string, extra: Record<string, string> = {}): Promise<Record<string, string>> {
  return gatewayProcessEnv({ port: await freePort(), adminPort: await freePort(), backendUrl: `http://127.0.0.1:${await freePort()}`, configDir }, extra)
}

t.test('a bad config file stops start-up with a message naming file, path and reason', async (t) => {
  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  writeFileSync(join(dir, 'keys.yaml'), `keys:\n  - { id: a, sha256: ${'c'.repeat(64)}, plan: gold }\n`)
  const proc = runEntry(t, 'src/gateway/server.ts', await gatewayEnv(dir))
  const { code } = await proc.exited
  t.equal(code, 1)
  t.match(proc.output(), 'keys.yaml: keys[0].plan: unknown plan \\"gold\\"')
})

t.test('with NODE_ENV=production the gateway refuses the demo keys', async (t) => {
  const proc = runEntry(t, 'src/gateway/server.ts', await gatewayEnv(FIXTURE_CONFIG_DIR, { NODE_ENV: 'production' }))
  const { code } = await proc.exited
  t.equal(code, 1)
  t.match(proc.output(), 'demo keys are configured (demo-free, demo-pro, demo-business, demo-enterprise)')
})

t.test('an invalid environment value is refused with its name', async (t) => {
  const proc = runEntry(t, 'src/gateway/server.ts', await gatewayEnv(FIXTURE_CONFIG_DIR, { GATEWAY_PORT: 'eighty' }))
  const { code } = await proc.exited
  t.equal(code, 1)
  t.match(proc.output(), 'GATEWAY_PORT: expected an integer from 0 to 65535, got "eighty"')
})

t.test('a port in use stops start-up with one line naming the port and its variable, exit 1', async (t) => {
  const blocker = createServer()
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve))
  t.teardown(() => blocker.close())
  const taken = String((blocker.address() as AddressInfo).port)
  for (const variable of ['GATEWAY_PORT', 'ADMIN_PORT']) {
    const proc = runEntry(t, 'src/gateway/server.ts', await gatewayEnv(FIXTURE_CONFIG_DIR, { [variable]: taken }))
    const { code } = await proc.exited
    t.equal(code, 1, variable)
    t.match(proc.output(), `"msg":"port ${taken} is in use (${variable})"`)
    t.notMatch(proc.output(), /\n\s+at /, 'no stack trace')
  }
})

// One gateway process for its whole life: it serves and reports health, a SIGHUP reloads its config
// (a file change alone does not: watching is off), and SIGTERM stops it with exit 0 — one start, not one
// for the serving checks and another for the reload.
t.test('one gateway process: serves, reports health, SIGHUP reloads its config (watching off), exits 0 on SIGTERM', async (t) => {
  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  const env = await gatewayEnv(dir)
  const proc = runEntry(t, 'src/gateway/server.ts', env)
  await waitForProcessHttp(proc, `http://127.0.0.1:${env.ADMIN_PORT}/healthz`)

  t.test('it serves and reports health', async (t) => {
    const health = await fetch(`http://127.0.0.1:${env.ADMIN_PORT}/healthz`)
    t.same(await health.json(), { status: 'ok' })
    const ready = await fetch(`http://127.0.0.1:${env.ADMIN_PORT}/readyz`)
    t.equal(ready.status, 503, 'no backend is running, so not ready')
    const report = await ready.json() as { status: string, checks: Record<string, { ok: boolean, error?: string }> }
    t.equal(report.status, 'not_ready')
    t.equal(report.checks.backend?.ok, false)
    t.match(report.checks.backend?.error, /ECONNREFUSED/)
    const res = await fetch(`http://127.0.0.1:${env.GATEWAY_PORT}/v1/pets`, { headers: { authorization: `Bearer ${DEMO_KEYS.free}` } })
    t.equal(res.status, 502)
  })

  t.test('SIGHUP reloads its config (watching off)', async (t) => {
    const before = await (await fetch(`http://127.0.0.1:${env.ADMIN_PORT}/admin/config`)).json() as { version: string, keys: { total: number } }
    t.equal(before.keys.total, 4)

    writeFileSync(join(dir, 'keys.yaml'), `keys:\n  - { id: only-one, sha256: ${'d'.repeat(64)}, plan: pro }\n`)
    await sleep(300)
    const unchanged = await (await fetch(`http://127.0.0.1:${env.ADMIN_PORT}/admin/config`)).json() as { version: string }
    t.equal(unchanged.version, before.version, 'with CONFIG_WATCH=false a file change alone does nothing')

    proc.child.kill('SIGHUP')
    const configNow = async (): Promise<{ version: string }> => await (await fetch(`http://127.0.0.1:${env.ADMIN_PORT}/admin/config`)).json() as { version: string }
    // Deadlines of polls, not waits: the reload's parse worker can take seconds to start on a busy machine.
    const after = await poll(async () => { const now = await configNow(); return now.version !== before.version && now }, 15_000, 50) ?? unchanged
    t.not(after.version, before.version)
    t.match(after, { keys: { total: 1, byPlan: { pro: 1 } } })
    // Log lines are batched and flushed within 200 ms.
    await poll(() => /"trigger":"SIGHUP".*"msg":"config reloaded"/.test(proc.output()), EVENT_TIMEOUT_MS)
    t.match(proc.output(), /"trigger":"SIGHUP".*"msg":"config reloaded"/)
  })

  t.test('SIGTERM stops it with exit 0', async (t) => {
    proc.child.kill('SIGTERM')
    const { code } = await proc.exited
    t.equal(code, 0)
    t.match(proc.output(), '"msg":"stopped"')
    t.match(proc.output(), /"store":\{"kind":"memory","nodes":\[\]\},"msg":"limiter store"/, 'one start-up line names the limiter store')
    t.notMatch(proc.output(), DEMO_KEYS.free)
  })
})
