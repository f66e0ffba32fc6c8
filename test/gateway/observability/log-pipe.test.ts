// Issue 39, row 2: a log destination that fails costs log lines, never requests, never signal
// handling. A real gateway process whose stdout and stderr are pipes: (1) the reader closes them
// (the shipper or the `node server | …` reader exits: EPIPE), (2) the reader stops reading (a slow
// shipper: the pipe fills). Before: both listeners stopped answering and SIGTERM no longer stopped
// the process. Now: every request is answered, the lost lines are counted in
// gateway_log_lines_dropped_total, and SIGTERM ends the process within the drain bound.
import { spawn, type ChildProcess } from 'node:child_process'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import t, { type Test } from 'tap'
import { startBackend } from '../../helpers/backend.js'
import { DEMO_KEYS, FIXTURE_CONFIG_DIR } from '../../helpers/gateway.js'
import { freePort, waitForHttp } from '../../helpers/ports.js'
import { CHILD_ENV, gatewayProcessEnv, REPO_ROOT, TS_NODE_ARGS } from '../../helpers/processes.js'
import { sampleValue, scrape } from '../../helpers/scrape.js'

const DRAIN_DELAY_MS = 200
const GRACE_MS = 2_000
/** server.ts's bound on the whole stop: drain delay + grace + its 5 s margin for closing the rest. */
const STOP_BOUND_MS = DRAIN_DELAY_MS + GRACE_MS + 5_000
/** Each request writes a log line of about 400 bytes: this many fill a 64 KiB pipe several times over. */
const REQUESTS = 1_500
const CONCURRENCY = 16
const BACKLOG_BYTES = 64 * 1024

interface Gateway {
  child: ChildProcess
  port: number
  adminPort: number
  exited: Promise<number | null>
}

async function startPipedGateway (t: Test): Promise<Gateway> {
  const backend = await startBackend(t)
  const [port, adminPort] = [await freePort(), await freePort()]
  const env = gatewayProcessEnv({ port, adminPort, backendUrl: backend.url, configDir: FIXTURE_CONFIG_DIR }, {
    LOG_LEVEL: 'info',
    SHUTDOWN_DRAIN_DELAY_MS: String(DRAIN_DELAY_MS),
    SHUTDOWN_GRACE_MS: String(GRACE_MS),
    // A small backlog: the unread pipe overflows within the test's requests.
    LOG_BACKLOG_BYTES: String(BACKLOG_BYTES)
  })
  const child = spawn(process.execPath, [...TS_NODE_ARGS, join(REPO_ROOT, 'src/gateway/server.ts')], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...CHILD_ENV, ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  const exited = new Promise<number | null>((resolve) => { child.once('exit', (code) => resolve(code)) })
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL')
      await exited
    }
  })
  let output = ''
  const collect = (chunk: Buffer): void => { output += chunk.toString() }
  child.stdout?.on('data', collect)
  child.stderr?.on('data', collect)
  try {
    // A loaded machine can take long to start a process.
    await waitForHttp(`http://127.0.0.1:${adminPort}/readyz`, 90_000, (s) => s === 200)
  } catch (err) {
    throw new Error(`gateway not ready: ${String(err)}; output: ${output.slice(-2_000)}`)
  }
  child.stdout?.off('data', collect)
  child.stderr?.off('data', collect)
  return { child, port, adminPort, exited }
}

/** `REQUESTS` keyed requests, `CONCURRENCY` at a time, each bounded: the statuses seen (0: no answer in 5 s). */
async function load (port: number): Promise<Map<number, number>> {
  const statuses = new Map<number, number>()
  let next = 0
  const worker = async (): Promise<void> => {
    while (next++ < REQUESTS) {
      let status = 0
      try {
        const res = await fetch(`http://127.0.0.1:${port}/v1/pets?limit=1`, { headers: { authorization: `Bearer ${DEMO_KEYS.enterprise}` }, signal: AbortSignal.timeout(5_000) })
        await res.arrayBuffer()
        status = res.status
      } catch {
        status = 0
      }
      statuses.set(status, (statuses.get(status) ?? 0) + 1)
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
  return statuses
}

async function assertServesAndStops (t: Test, gw: Gateway): Promise<void> {
  const statuses = await load(gw.port)
  t.comment(`statuses: ${JSON.stringify([...statuses])}`)
  t.equal(statuses.get(200), REQUESTS, `every one of ${REQUESTS} requests answered 200`)
  const health = await fetch(`http://127.0.0.1:${gw.adminPort}/healthz`, { signal: AbortSignal.timeout(5_000) })
  t.equal(health.status, 200, 'the admin listener answers')
  const { samples } = await scrape(`http://127.0.0.1:${gw.adminPort}`)
  const dropped = sampleValue(samples, 'gateway_log_lines_dropped_total') ?? 0
  t.comment(`log lines dropped: ${dropped}`)
  t.ok(dropped > 0, 'the lines the destination could not take are counted as dropped')

  const signalled = performance.now()
  gw.child.kill('SIGTERM')
  const code = await Promise.race([gw.exited, new Promise<'running'>((resolve) => setTimeout(() => resolve('running'), STOP_BOUND_MS + 2_000))])
  const tookMs = performance.now() - signalled
  t.comment(`exit ${String(code)} ${Math.round(tookMs)} ms after SIGTERM`)
  t.equal(code, 0, 'SIGTERM stops the process cleanly')
  t.ok(tookMs <= STOP_BOUND_MS, `within the drain bound (${Math.round(tookMs)} ≤ ${STOP_BOUND_MS} ms)`)
}

t.test('stdout and stderr closed by their reader (EPIPE): every request answered, lines counted as dropped, SIGTERM stops it', async (t) => {
  const gw = await startPipedGateway(t)
  gw.child.stdout?.destroy()
  gw.child.stderr?.destroy()
  await assertServesAndStops(t, gw)
})

t.test('stdout not read (a slow reader, the pipe full): every request answered, lines counted as dropped, SIGTERM stops it', async (t) => {
  const gw = await startPipedGateway(t)
  // Nobody reads: the pipe's buffer fills after a few hundred lines.
  gw.child.stdout?.pause()
  gw.child.stderr?.pause()
  await assertServesAndStops(t, gw)
})
