// SIGTERM under load, against the real entry point (src/gateway/server.ts as a child process, with a
// real Redis): keep-alive clients that ignore readiness keep sending while the signal arrives, and
// every request is accounted for. A request either got a complete HTTP response (200, or 503
// `unavailable` in the Error shape when it arrived on a kept-alive connection while the listener
// closed) or was never accepted: refused at connect (ECONNREFUSED), or reset on a brand-new
// connection the server never read a request from (the kernel's listen backlog when the listener
// closes — what a load balancer that honours readiness never sends). A reset or hang-up on a
// *reused* keep-alive connection, or on a request the gateway had started, is a dropped request:
// there must be none. Slow requests in flight at the signal finish; readiness fails first and stays
// 503 for the whole drain; Redis is closed; the process exits 0.
import { Agent, request as httpRequest } from 'node:http'
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import { pino } from 'pino'
import t, { type Test } from 'tap'
import { ReadinessRegistry } from '../../../src/gateway/runtime/readiness.js'
import { shutdownPlugin, stopGateway } from '../../../src/gateway/runtime/shutdown.js'
import { DEMO_KEYS, FIXTURE_CONFIG_DIR } from '../../helpers/config-fixture.js'
import { startEchoUpstream } from '../../helpers/echo-upstream.js'
import { poll, sleep, until } from '../../helpers/poll.js'
import { freePort } from '../../helpers/ports.js'
import { gatewayProcessEnv, runEntry, waitForProcessHttp } from '../../helpers/processes.js'
import { startRedis } from '../../helpers/redis.js'

const CLIENTS = 16
const FAST_DELAY_MS = 20
const SLOW_DELAY_MS = 800
const LOAD_BEFORE_SIGNAL = 100
const AUTH = { authorization: `Bearer ${DEMO_KEYS.enterprise}` }

interface Outcome {
  kind: 'response' | 'refused' | 'dropped'
  status?: number
  body?: string
  error?: string
  startedAt: number
  endedAt: number
}

function errorCode (err: unknown): string {
  const e = err as { code?: string, cause?: { code?: string }, message?: string }
  return e.code ?? e.cause?.code ?? e.message ?? String(err)
}

/** One GET on a keep-alive agent; `reusedSocket` tells a fresh connection from a kept-alive one. */
async function send (agent: Agent, url: string, path: string): Promise<Outcome> {
  const startedAt = Date.now()
  return await new Promise((resolve) => {
    const req = httpRequest(url + path, { agent, headers: AUTH }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => resolve({ kind: 'response', status: res.statusCode, body: Buffer.concat(chunks).toString(), startedAt, endedAt: Date.now() }))
      res.on('error', (err) => resolve({ kind: 'dropped', error: `mid-body: ${err.message}`, startedAt, endedAt: Date.now() }))
    })
    req.on('error', (err) => {
      const code = errorCode(err)
      const neverAccepted = code === 'ECONNREFUSED' || (code === 'ECONNRESET' && !req.reusedSocket)
      resolve({ kind: neverAccepted ? 'refused' : 'dropped', error: `${code} (reused socket: ${String(req.reusedSocket)}): ${err.message}`, startedAt, endedAt: Date.now() })
    })
    req.end()
  })
}

async function startStack (t: Test, drainDelayMs: number | undefined) {
  const upstream = await startEchoUpstream(t)
  upstream.behave((req, res) => {
    const delay = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('delay') ?? '0')
    setTimeout(() => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end('[]')
    }, delay)
  })
  const redis = await startRedis(t)
  const port = await freePort()
  const adminPort = await freePort()
  const proc = runEntry(t, 'src/gateway/server.ts', gatewayProcessEnv({ port, adminPort, backendUrl: upstream.url, configDir: FIXTURE_CONFIG_DIR, redisUrl: redis.url }, {
    SHUTDOWN_GRACE_MS: '5000',
    ...(drainDelayMs === undefined ? {} : { SHUTDOWN_DRAIN_DELAY_MS: String(drainDelayMs) })
  }))
  await waitForProcessHttp(proc, `http://127.0.0.1:${adminPort}/healthz`) // start-up only; slow on a busy machine
  return { proc, redis, upstream, url: `http://127.0.0.1:${port}`, adminUrl: `http://127.0.0.1:${adminPort}` }
}

async function runScenario (t: Test, drainDelayMs: number | undefined): Promise<void> {
  const { proc, redis, upstream, url, adminUrl } = await startStack(t, drainDelayMs)
  t.equal((await fetch(`${adminUrl}/readyz`)).status, 200, 'ready before the signal')
  const clientsBefore = Number((await redis.cli('CLIENT', 'LIST')).split('\n').filter((l) => l.includes('cmd=')).length)
  t.ok(clientsBefore >= 2, 'the gateway holds a Redis connection')

  const agent = new Agent({ keepAlive: true, maxSockets: CLIENTS + 8 })
  t.teardown(() => agent.destroy())
  const outcomes: Outcome[] = []
  let exited = false
  void proc.exited.then(() => { exited = true })

  async function client (): Promise<void> {
    while (!exited) {
      const outcome = await send(agent, url, `/v1/pets?delay=${FAST_DELAY_MS}`)
      outcomes.push(outcome)
      if (outcome.kind === 'refused') return
    }
  }
  const readiness: Array<{ at: number, status: number }> = []
  async function probeReadiness (): Promise<void> {
    while (!exited) {
      try {
        const res = await fetch(`${adminUrl}/readyz`)
        await res.arrayBuffer()
        readiness.push({ at: Date.now(), status: res.status })
      } catch { return }
      await sleep(20)
    }
  }

  const clients = Array.from({ length: CLIENTS }, client)
  // Load first: wait for LOAD_BEFORE_SIGNAL answers (bounded; on a busy machine this takes longer
  // than on an idle one, so a fixed wait would measure the machine, not the gateway).
  await poll(() => outcomes.filter((o) => o.kind === 'response').length >= LOAD_BEFORE_SIGNAL, 10_000, 20)
  const slow = Array.from({ length: 6 }, () => send(agent, url, `/v1/pets?delay=${SLOW_DELAY_MS}`))
  // In flight at the signal means at the backend already: a fixed wait here raced the proxy on a busy machine.
  await until('the slow requests reached the backend', () => upstream.received.filter((r) => r.url.includes(`delay=${SLOW_DELAY_MS}`)).length >= slow.length)
  const signalledAt = Date.now()
  proc.child.kill('SIGTERM')
  const probe = probeReadiness()
  const slowOutcomes = await Promise.all(slow)
  const { code } = await proc.exited
  await Promise.all([...clients, probe])

  const responses = outcomes.filter((o) => o.kind === 'response')
  const dropped = outcomes.filter((o) => o.kind === 'dropped')
  t.equal(code, 0, 'exit code 0')
  const before = responses.filter((o) => o.startedAt < signalledAt).length
  t.ok(before >= LOAD_BEFORE_SIGNAL, `load before the signal (${before} responses)`)
  t.strictSame(dropped, [], `no request dropped without a response (of ${outcomes.length + slowOutcomes.length})`)
  t.strictSame(slowOutcomes.map((o) => [o.kind, o.status]), slowOutcomes.map(() => ['response', 200]), 'slow requests in flight at the signal completed')
  for (const o of responses) {
    if (o.status === 200) continue
    t.equal(o.status, 503, 'the only other answer is 503')
    t.strictSame(JSON.parse(o.body ?? ''), { code: 'unavailable', message: 'The gateway is shutting down', status: 503 })
  }
  t.ok(outcomes.some((o) => o.kind === 'refused'), 'after the listener closed, new connections are refused (not accepted)')
  // The signal takes a moment to reach the child: probes before the first 503 may still say 200.
  const firstFailing = readiness.findIndex((r) => r.status === 503)
  t.ok(firstFailing >= 0, 'readiness failed after the signal')
  const draining = readiness.slice(firstFailing)
  // The count is the machine's (a probe every 20 ms plus its own latency, through the slow requests' drain); what must hold is that none said 200 again.
  t.ok(draining.length >= 2 && draining.every((r) => r.status === 503), `once failing, readiness stayed 503 until the admin port closed (${draining.length} probes)`)
  if (drainDelayMs !== 0) {
    const failedAt = readiness[firstFailing]?.at ?? Infinity
    // With the default 1 s delay, requests sent after the failing probe came back are still served.
    // A 300 ms delay can be used up by the time a probe's answer arrives on a busy machine: there,
    // requests still answered 200 after readiness was seen failing show the same order.
    const servedAfter = drainDelayMs === undefined
      ? responses.some((o) => o.status === 200 && o.startedAt > failedAt)
      : responses.some((o) => o.status === 200 && o.endedAt > failedAt)
    t.ok(servedAfter, 'readiness failed first: the listener still served requests after it')
  }

  const output = proc.output()
  t.match(output, /"msg":"drain finished"/)
  t.match(output, /"forced":false/)
  t.match(output, /"msg":"stopped"/)
  t.notMatch(output, DEMO_KEYS.enterprise)
  const clientsAfter = (await redis.cli('CLIENT', 'LIST')).split('\n').filter((l) => l.includes('cmd=')).length
  t.equal(clientsAfter, 1, 'only redis-cli itself is connected: the gateway closed its Redis connection')
  return undefined
}

t.test('SIGTERM under keep-alive load (default drain delay): readiness fails first, nothing dropped, in-flight requests finish, exit 0', async (t) => {
  await runScenario(t, undefined)
})

t.test('with a shorter SHUTDOWN_DRAIN_DELAY_MS the same holds', async (t) => {
  await runScenario(t, 300)
})

t.test('the drain is bounded: a request still running at the grace deadline is cut and the process exits 0', async (t) => {
  const upstream = await startEchoUpstream(t)
  upstream.behave(() => { /* never answers */ })
  const port = await freePort()
  const adminPort = await freePort()
  const proc = runEntry(t, 'src/gateway/server.ts', gatewayProcessEnv({ port, adminPort, backendUrl: upstream.url, configDir: FIXTURE_CONFIG_DIR }, {
    SHUTDOWN_GRACE_MS: '500',
    SHUTDOWN_DRAIN_DELAY_MS: '0'
  }))
  await waitForProcessHttp(proc, `http://127.0.0.1:${adminPort}/healthz`)
  const hanging = fetch(`http://127.0.0.1:${port}/v1/pets`, { headers: AUTH }).then(() => 'answered', (err: unknown) => errorCode(err))
  await until('the request reached the backend', () => upstream.received.length >= 1)
  const signalledAt = Date.now()
  proc.child.kill('SIGTERM')
  const { code } = await proc.exited
  t.equal(code, 0)
  // 500 ms of grace plus the process's own exit, far from the 10 s an upstream timeout would take (however busy the machine).
  const stoppedMs = Date.now() - signalledAt
  t.ok(stoppedMs < 8_000, `stopped ${stoppedMs} ms after the signal: within the grace period, not the 10 s upstream timeout`)
  t.equal(await hanging, 'UND_ERR_SOCKET', 'the request past the deadline was cut (the one case a request goes unanswered)')
  t.match(proc.output(), /"msg":"drain deadline reached; closing the connections still open"/)
  t.match(proc.output(), /"forced":true/)
})

// The same stop sequence run in this process (stopGateway on a bare app with the shutdown plugin), where
// the order of its steps and what it logs can be read directly.
interface LogLine { level: number, msg: string, [field: string]: unknown }

async function stoppableApp (t: Test): Promise<{ app: FastifyInstance, readiness: ReadinessRegistry, url: string, entered: Promise<void>, release: () => void, lines: LogLine[], log: FastifyBaseLogger }> {
  const readiness = new ReadinessRegistry()
  const app = Fastify()
  await app.register(shutdownPlugin, { readiness })
  let release = (): void => {}
  const released = new Promise<void>((resolve) => { release = resolve })
  let entered = (): void => {}
  const enteredOnce = new Promise<void>((resolve) => { entered = resolve })
  app.get('/held', async () => {
    entered()
    await released
    return { ok: true }
  })
  app.get('/hangs', async () => {
    entered()
    return await new Promise(() => { /* never answers */ })
  })
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(async () => { release(); await app.close() })
  const address = app.server.address()
  const port = typeof address === 'object' && address !== null ? address.port : 0
  const lines: LogLine[] = []
  const log: FastifyBaseLogger = pino({ level: 'info' }, { write (line: string) { lines.push(JSON.parse(line) as LogLine) } })
  return { app, readiness, url: `http://127.0.0.1:${port}`, entered: enteredOnce, release, lines, log }
}

t.test('stopGateway in process: readiness fails first, a request in flight through the drain delay finishes with Connection: close, not forced', async (t) => {
  const { app, readiness, url, entered, release, lines, log } = await stoppableApp(t)
  const answered = fetch(`${url}/held`).then(async (res) => ({ status: res.status, connection: res.headers.get('connection'), body: await res.json() as unknown }))
  await entered
  t.equal(app.drain.inFlight, 1, 'the held request is counted in flight')
  const stopping = stopGateway(app, { readiness, drainDelayMs: 50, graceMs: 30_000, log })
  t.ok(readiness.draining, 'readiness fails as soon as the stop begins')
  t.notOk(app.drain.closing, 'the listener is not closing yet: the drain delay comes first')
  release()
  t.same(await answered, { status: 200, connection: 'close', body: { ok: true } }, 'the request in flight is answered, telling its client to leave')
  await stopping
  t.notOk(app.server.listening, 'the listener is closed')
  t.same(lines.map((line) => line.msg), [
    'readiness failing; serving until the drain delay ends',
    'listener closing; draining in-flight requests',
    'drain finished'
  ], 'logged in the order of the steps')
  t.equal(lines[0]?.drainDelayMs, 50)
  t.equal(lines[2]?.forced, false, 'nothing was cut')
  const durationMs = Number(lines[2]?.durationMs)
  t.ok(durationMs >= 49, `the drain took the delay at least (${durationMs} ms)`)
})

t.test('stopGateway in process: a request still running at the grace deadline is cut, logged at warn, and the drain is marked forced', async (t) => {
  const { app, readiness, url, entered, lines, log } = await stoppableApp(t)
  const cut = fetch(`${url}/hangs`).then(() => 'answered', (err: unknown) => errorCode(err))
  await entered
  await stopGateway(app, { readiness, drainDelayMs: 0, graceMs: 100, log })
  t.equal(await cut, 'UND_ERR_SOCKET', 'the hanging request was cut')
  t.same(lines.map((line) => [line.level, line.msg]), [
    [30, 'listener closing; draining in-flight requests'],
    [40, 'drain deadline reached; closing the connections still open'],
    [30, 'drain finished']
  ], 'no drain delay line without a delay; the deadline is a warning')
  t.equal(lines[0]?.graceMs, 100)
  t.equal(lines[1]?.inFlight, 1, 'the warning counts the request it cuts')
  t.equal(lines[2]?.forced, true)
})
