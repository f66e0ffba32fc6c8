// Regression (issue 26, finding 8): a config path that is not a regular file — a FIFO, a device, a
// directory — is refused at once. With a FIFO as keys.yaml a reload used to wait for a writer: the
// watch reload failed after 60 s, POST /admin/reload took 117 s, the parse worker stayed blocked in
// open() and SIGTERM did not stop the gateway. Now every path that loads config (start-up, reload
// by watch and by the admin API, `config check`) names the file and what it is, and nothing waits.
import { execFileSync } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { once } from 'node:events'
import { createServer } from 'node:net'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { loadConfigDir } from '../../../src/gateway/config/read-files.js'
import { cliInProcess } from '../../helpers/cli.js'
import { startGateway } from '../../helpers/gateway.js'
import { ADMIN_JSON, bearer, DEMO_KEYS, FIXTURE_CONFIG_DIR } from '../../helpers/config-fixture.js'
import { until } from '../../helpers/poll.js'
import { freePort, PROCESS_START_TIMEOUT_MS } from '../../helpers/ports.js'
import { gatewayProcessEnv, runEntry } from '../../helpers/processes.js'

/**
 * "At once": a refusal, not a wait for a writer. No writer ever opens these FIFOs, so the code that
 * waited for one never answered on its own (the watch gave up after 60 s, POST /admin/reload took
 * 117 s); any answer under 45 s is the refusal. Starting a parse worker took 27.6 s at load 18–35:
 * the bound was 5 s.
 */
const AT_ONCE_MS = 45_000

function configDir (t: Test): string {
  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  return dir
}

function replaceWithFifo (path: string): void {
  rmSync(path)
  execFileSync('mkfifo', [path])
}

async function timed<T> (run: () => Promise<T>): Promise<{ result: T, ms: number }> {
  const started = performance.now()
  const result = await run()
  return { result, ms: performance.now() - started }
}

t.test('a reload refuses a FIFO, a directory and a device at once, and the gateway keeps serving', async (t) => {
  const dir = configDir(t)
  const gw = await startGateway(t, { reload: { dir, watch: false } })
  await gw.app.configReloader.ready()
  const keys = join(dir, 'keys.yaml')
  const cases: Array<[string, () => void, string]> = [
    ['a FIFO', () => replaceWithFifo(keys), 'a FIFO'],
    ['a directory', () => { rmSync(keys); mkdirSync(keys) }, 'a directory'],
    ['a character device (a symlink to /dev/zero)', () => { rmSync(keys, { recursive: true }); symlinkSync('/dev/zero', keys) }, 'a character device']
  ]
  for (const [name, make, kind] of cases) {
    make()
    const { result, ms } = await timed(async () => await fetch(`${gw.adminUrl}/admin/reload`, { method: 'POST', headers: ADMIN_JSON }))
    t.equal(result.status, 422, name)
    t.same((await result.json() as { problems: string[] }).problems, [`keys.yaml: ${keys} is ${kind}, not a regular file`], `${name}: named`)
    t.ok(ms < AT_ONCE_MS, `${name}: refused in ${ms.toFixed(0)} ms`)
  }
  const res = await fetch(`${gw.url}/v1/store/orders`, { headers: bearer(DEMO_KEYS.pro) })
  t.equal(res.status, 200, 'still serving on the last good config')
  await res.arrayBuffer()
})

t.test('read on this thread (the CLI\'s key commands): a FIFO, a directory, a device and a socket are each named in one refusal', async (t) => {
  const dir = configDir(t)
  replaceWithFifo(join(dir, 'plans.yaml'))
  rmSync(join(dir, 'keys.yaml'))
  mkdirSync(join(dir, 'keys.yaml'))
  rmSync(join(dir, 'routes.yaml'))
  symlinkSync('/dev/zero', join(dir, 'routes.yaml'))
  // A Unix socket cannot be opened at all (ENXIO): named by the error of its open. Made under a short path (a
  // socket's is at most 107 bytes) and linked in.
  const socketDir = mkdtempSync(join(tmpdir(), 'sock-'))
  const socket = createServer()
  socket.listen(join(socketDir, 's'))
  await once(socket, 'listening')
  t.teardown(() => { socket.close(); rmSync(socketDir, { recursive: true, force: true }) })
  symlinkSync(join(socketDir, 's'), join(dir, 'webhooks.yaml'))
  const { result, ms } = await timed(async () => await Promise.resolve().then(() => { loadConfigDir(dir) }).then(() => undefined, (err: unknown) => err))
  t.match(result, { name: 'ConfigError' })
  t.same((result as { problems: string[] }).problems, [
    `plans.yaml: ${join(dir, 'plans.yaml')} is a FIFO, not a regular file`,
    `keys.yaml: ${join(dir, 'keys.yaml')} is a directory, not a regular file`,
    `routes.yaml: ${join(dir, 'routes.yaml')} is a character device, not a regular file`,
    `webhooks.yaml: cannot read ${join(dir, 'webhooks.yaml')}: ENXIO`
  ], 'every file that could not be read, and what it is')
  t.ok(ms < AT_ONCE_MS, `refused in ${ms.toFixed(0)} ms`)
})

t.test('config check refuses a FIFO at once, in one line', async (t) => {
  const dir = configDir(t)
  replaceWithFifo(join(dir, 'plans.yaml'))
  const { result, ms } = await timed(async () => await cliInProcess(['config', 'check', dir]))
  t.equal(result.code, 1)
  t.equal(result.stderr, `plans.yaml: ${join(dir, 'plans.yaml')} is a FIFO, not a regular file\n`)
  t.ok(ms < AT_ONCE_MS, `answered in ${ms.toFixed(0)} ms`)
})

t.test('a gateway process: start-up refuses a FIFO; a running one refuses it on a watched change, and SIGTERM stops it', async (t) => {
  const dir = configDir(t)
  const env = async (): Promise<Record<string, string>> =>
    gatewayProcessEnv({ port: await freePort(), adminPort: await freePort(), backendUrl: `http://127.0.0.1:${await freePort()}`, configDir: dir },
      { CONFIG_WATCH: 'true', CONFIG_QUIET_MS: '100' })
  const keys = join(dir, 'keys.yaml')

  const running = runEntry(t, 'src/gateway/server.ts', await env())
  await until('the gateway is up', () => running.output().includes('"msg":"gateway listening"'), PROCESS_START_TIMEOUT_MS)
  replaceWithFifo(keys)
  const rejected = await timed(async () => await until('the watched change is refused',
    () => running.output().includes(`"problems":["keys.yaml: ${keys} is a FIFO, not a regular file"]`), AT_ONCE_MS + 100))
  t.ok(rejected.ms < 100 + AT_ONCE_MS, `refused ${rejected.ms.toFixed(0)} ms after the change (quiet period 100 ms)`)
  const stopping = await timed(async () => {
    running.child.kill('SIGTERM')
    return await running.exited
  })
  t.equal(stopping.result.code, 0, 'SIGTERM stops it')
  // The regression: the parse worker blocked in open() and SIGTERM never stopped the process.
  t.ok(stopping.ms < AT_ONCE_MS, `in ${stopping.ms.toFixed(0)} ms`)

  const starting = runEntry(t, 'src/gateway/server.ts', await env())
  const { result, ms } = await timed(async () => await starting.exited)
  t.equal(result.code, 1, 'start-up refuses it')
  t.match(starting.output(), `keys.yaml: ${keys} is a FIFO, not a regular file`)
  t.notMatch(starting.output(), /\n\s+at /, 'no stack trace')
  t.ok(ms < PROCESS_START_TIMEOUT_MS, `exited in ${ms.toFixed(0)} ms`)
})
