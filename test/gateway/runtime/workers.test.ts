// GATEWAY_WORKERS: the real entry point as N cluster workers on one port and one Redis. The limit is
// one limit across the workers (exact, not N × it), both workers serve, a crashed worker is replaced,
// SIGTERM stops them all (the replacement too), and without Redis more than one worker is refused.
// The limit, the replacement and the stop are one primary's life: its workers start once for them.
import t, { type Test } from 'tap'
import { createHash } from 'node:crypto'
import { cpSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { startBackend } from '../../helpers/backend.js'
import { FIXTURE_CONFIG_DIR } from '../../helpers/config-fixture.js'
import { poll, until } from '../../helpers/poll.js'
import { claimPort, freePort, isFree, processAlive, PROCESS_START_TIMEOUT_MS } from '../../helpers/ports.js'
import { gatewayProcessEnv, runEntry, type RunningProcess, waitForProcessHttp } from '../../helpers/processes.js'
import { startRedis } from '../../helpers/redis.js'

const TOKEN = 'psk_test_workers_0123456789abcdef'
/** A second key, far from its limit: what shows the replacement serves once the first key's minute is spent. */
const ROOMY_TOKEN = 'psk_test_workers_1123456789abcdef'
const LIMIT = 20
/**
 * Cluster workers start (and a dead one is replaced) within this, even on a busy machine: a poll's
 * deadline, not a wait (two workers took over 15 s to listen at load 12 on 2 cores).
 */
const WORKERS_START_MS = PROCESS_START_TIMEOUT_MS

/** A free port whose successor is free too (worker 1's admin listener takes ADMIN_PORT + 1). */
async function freePortPair (): Promise<number> {
  for (;;) {
    const port = await freePort()
    if (port >= 65535) continue
    if (claimPort(port + 1) && await isFree(port + 1)) return port
  }
}

function configDir (t: Test): string {
  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  writeFileSync(join(dir, 'keys.yaml'), [
    'keys:',
    '  - id: twenty-a-minute',
    `    sha256: ${createHash('sha256').update(TOKEN).digest('hex')}`,
    '    plan: enterprise',
    `    limits: { perMinute: ${LIMIT}, perDay: 1000 }`,
    '  - id: roomy',
    `    sha256: ${createHash('sha256').update(ROOMY_TOKEN).digest('hex')}`,
    '    plan: enterprise',
    '    limits: { perMinute: 1000, perDay: 100000 }',
    ''
  ].join('\n'))
  return dir
}

function workerPids (proc: RunningProcess): number[] {
  return [...proc.output().matchAll(/"workerPid":(\d+)[^\n]*"msg":"gateway worker started"/g)].map((m) => Number(m[1]))
}

async function requestsCounted (adminPort: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text()
  return [...text.matchAll(/^gateway_requests_total\{[^}]*\} (\d+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0)
}

t.test('two workers on one Redis: exactly the limit of a key across both; a worker that dies is replaced; SIGTERM stops all', async (t) => {
  const redis = await startRedis(t)
  const backend = await startBackend(t)
  const port = await freePort()
  const adminPort = await freePortPair()
  const proc = runEntry(t, 'src/gateway/server.ts', gatewayProcessEnv({ port, adminPort, backendUrl: backend.url, configDir: configDir(t), redisUrl: redis.url }, { GATEWAY_WORKERS: '2' }))
  await until('two workers listening', () => (proc.output().match(/"msg":"gateway listening"/g) ?? []).length === 2, WORKERS_START_MS)
  await waitForProcessHttp(proc, `http://127.0.0.1:${adminPort}/healthz`)
  await waitForProcessHttp(proc, `http://127.0.0.1:${adminPort + 1}/healthz`)
  const pids = workerPids(proc)
  t.equal(pids.length, 2, 'two worker processes')

  t.test('exactly the limit of a key across both workers', async (t) => {
    const statuses = await Promise.all(Array.from({ length: 2 * LIMIT }, async () => {
      const res = await fetch(`http://127.0.0.1:${port}/v1/pets`, { headers: { authorization: `Bearer ${TOKEN}` } })
      await res.arrayBuffer()
      return res.status
    }))
    t.equal(statuses.filter((s) => s === 200).length, LIMIT, 'exactly the limit is admitted across both workers')
    t.equal(statuses.filter((s) => s === 429).length, LIMIT, 'the rest is answered 429')
    const [first, second] = await Promise.all([requestsCounted(adminPort), requestsCounted(adminPort + 1)])
    t.ok(first > 0 && second > 0, `both workers served (${first} and ${second} requests)`)
    t.equal(first + second, 2 * LIMIT, 'every request was counted by exactly one worker')
  })

  t.test('a worker that dies is replaced', async (t) => {
    const [victim] = pids
    if (victim === undefined) throw new Error('no worker pid')
    process.kill(victim, 'SIGKILL')
    await until('a replacement worker', () => (proc.output().match(/"msg":"gateway listening"/g) ?? []).length === 3, WORKERS_START_MS)
    t.match(proc.output(), '"msg":"gateway worker exited unexpectedly: starting a new one"')
    t.equal(workerPids(proc).length, 3, 'a third worker process started')
    // Served again (the second key: the first spent its minute above). Polled: on a busy machine a fresh
    // worker's first Redis call can outlast the 50 ms store timeout, and the fallback, knowing nothing of
    // the key yet, answers 429 until Redis does.
    const seen: number[] = []
    const served = await poll(async () => {
      const res = await fetch(`http://127.0.0.1:${port}/v1/pets`, { headers: { authorization: `Bearer ${ROOMY_TOKEN}` } })
      await res.arrayBuffer()
      seen.push(res.status)
      return res.status === 200
    }, 10_000, 500)
    t.ok(served, `served after the replacement (statuses: ${seen.join(', ')})`)
  })

  t.test('SIGTERM stops all, the replacement too', async (t) => {
    const all = workerPids(proc)
    proc.child.kill('SIGTERM')
    const { code } = await proc.exited
    t.equal(code, 0, 'the primary exits 0 once the workers have drained')
    t.notOk(all.some(processAlive), `no worker is left running (${all.join(', ')})`)
    t.match(proc.output(), '"msg":"all workers stopped"')
    t.equal((proc.output().match(/"msg":"stopped"/g) ?? []).length, 2, 'each running worker ran its graceful stop (the survivor and the replacement)')
  })
})

t.test('more than one worker without Redis is refused: limits would be per worker', async (t) => {
  const proc = runEntry(t, 'src/gateway/server.ts', gatewayProcessEnv({ port: await freePort(), adminPort: 0, backendUrl: 'http://127.0.0.1:9', configDir: FIXTURE_CONFIG_DIR }, { GATEWAY_WORKERS: '2' }))
  const { code } = await proc.exited
  t.equal(code, 1)
  t.match(proc.output(), 'GATEWAY_WORKERS > 1 needs Redis')
})
