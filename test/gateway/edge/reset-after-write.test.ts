// Issue 39, row 1: connections that each write 32 pipelined keyed requests and reset (RST) right
// after the write, one after another, with Redis up (the limiter's answer is asynchronous: the
// connection is gone by the time a request reaches the backend) and a backend that answers at once.
// Before: 500s (a TypeError reading the client address from the gone socket in the forwarder),
// upstream connections and in-flight counts never given back, and then a public listener that
// answered nothing while /healthz said 200. Now: no 5xx, every count back to 0, and a client on
// another address is answered throughout. 1, 50 and 500 connections from one address, and 500
// from 11 loopback addresses.
import { connect } from 'node:net'
import t, { type Test } from 'tap'
import { DEMO_KEYS, startGateway, type StartedGateway } from '../../helpers/gateway.js'
import { until } from '../../helpers/poll.js'
import { startRedis } from '../../helpers/redis.js'
import { sampleValue, scrape, type Sample } from '../../helpers/scrape.js'
import { percentileOf, summary, victimKeptAlive } from '../../helpers/victim.js'

const PIPELINED = 32
/** Attack addresses of the multi-address runs: 127.0.39.1 … 127.0.39.11. The victim is elsewhere. */
const ATTACK_ADDRESSES = Array.from({ length: 11 }, (_, i) => `127.0.39.${i + 1}`)
const VICTIM_ADDRESS = '127.0.40.1'
/**
 * The victim's p99 bound asserted: generous, so that a loaded 2-core CI machine (load 4–10) cannot
 * break it; the measured value is printed, and the brief's target is 200 ms.
 */
const VICTIM_P99_BOUND_MS = 1_000

const PIPELINE = `GET /v1/pets?limit=1 HTTP/1.1\r\nhost: gateway\r\nauthorization: Bearer ${DEMO_KEYS.enterprise}\r\n\r\n`.repeat(PIPELINED)

/** Connects from `localAddress`, writes the pipeline, and resets the connection right after the write. */
async function writeThenReset (port: number, localAddress: string): Promise<void> {
  await new Promise<void>((resolve) => {
    const socket = connect({ host: '127.0.0.1', port, localAddress })
    socket.on('error', () => {})
    socket.on('close', () => resolve())
    socket.once('connect', () => {
      socket.write(PIPELINE)
      socket.resetAndDestroy()
    })
  })
}

function total (samples: Sample[], name: string, match: (labels: Record<string, string>) => boolean): number {
  return samples.filter((s) => s.name === name && match(s.labels)).reduce((sum, s) => sum + s.value, 0)
}

async function assertNothingHeld (t: Test, gw: StartedGateway): Promise<void> {
  const settled = await until('every count back to 0', async () => {
    const { samples } = await scrape(gw.adminUrl)
    return sampleValue(samples, 'gateway_in_flight_requests') === 0 && sampleValue(samples, 'gateway_upstream_in_flight') === 0 &&
      gw.app.drain.inFlight === 0 && gw.app.loadShedding.inFlight === 0 && gw.app.upstream.queued === 0
  }, 10_000).then(() => true, () => false)
  const { samples } = await scrape(gw.adminUrl)
  t.comment(`in flight ${sampleValue(samples, 'gateway_in_flight_requests')}, upstream in flight ${sampleValue(samples, 'gateway_upstream_in_flight')}, ` +
    `drain ${gw.app.drain.inFlight}, upstream queued ${gw.app.upstream.queued}`)
  t.ok(settled, 'in flight (shedding and drain), upstream connections and the upstream queue all back to 0')
  const fiveHundreds = total(samples, 'gateway_requests_total', (l) => (l.status ?? '').startsWith('5'))
  t.comment(`answered: ${JSON.stringify(samples.filter((s) => s.name === 'gateway_requests_total' && s.value > 0).map((s) => [s.labels.status, s.value]))}`)
  t.equal(fiveHundreds, 0, 'no 5xx answered or counted')
  t.notMatch(gw.rawLogs(), /TypeError/, 'no TypeError logged')
  const res = await fetch(`${gw.url}/v1/pets?limit=1`, { headers: { authorization: `Bearer ${DEMO_KEYS.pro}` }, signal: AbortSignal.timeout(5_000) })
  t.equal(res.status, 200, 'the public listener still serves')
  await res.arrayBuffer()
}

async function run (t: Test, connections: number, addresses: readonly string[]): Promise<void> {
  const redis = await startRedis(t)
  const gw = await startGateway(t, { logLevel: 'warn', loadShedding: {}, limiter: { settings: { redisUrl: redis.url } } })
  const port = Number(new URL(gw.url).port)
  // Warm up: the limiter's scripts loaded, an upstream connection open.
  await (await fetch(`${gw.url}/v1/pets?limit=1`, { headers: { authorization: `Bearer ${DEMO_KEYS.pro}` } })).arrayBuffer()

  let attacking = true
  const attack = (async () => {
    for (let i = 0; i < connections; i++) await writeThenReset(port, addresses[i % addresses.length] ?? '127.0.0.1')
    attacking = false
  })()
  // The victim: one request every 20 ms on its own kept-alive connection, while the attack lasts (and at least 25).
  const victim = await victimKeptAlive({ host: '127.0.0.1', port }, VICTIM_ADDRESS, { count: 25, intervalMs: 20, key: DEMO_KEYS.business })
  await attack
  const more = attacking ? undefined : await victimKeptAlive({ host: '127.0.0.1', port }, VICTIM_ADDRESS, { count: 10, intervalMs: 20, key: DEMO_KEYS.business })
  const latencies = [...victim.latencies, ...(more?.latencies ?? [])].sort((a, b) => a - b)
  const sent = victim.sent + (more?.sent ?? 0)
  const answered = victim.answered + (more?.answered ?? 0)
  t.comment(`victim during ${connections} resets from ${addresses.length} address(es): ${summary(victim)}; p99 of all ${percentileOf(latencies, 99).toFixed(1)} ms`)
  t.ok(answered >= 0.99 * sent, `the victim answered ≥ 99 % (${answered} of ${sent})`)
  t.equal(victim.statuses['200'] ?? 0, victim.answered, 'every victim answer a 200')
  t.ok(percentileOf(latencies, 99) <= VICTIM_P99_BOUND_MS, `victim p99 ${percentileOf(latencies, 99).toFixed(1)} ms ≤ ${VICTIM_P99_BOUND_MS} ms (target 200 ms)`)
  await assertNothingHeld(t, gw)
}

for (const connections of [1, 50, 500]) {
  t.test(`${connections} connection(s) × 32 pipelined keyed requests, reset right after the write`, async (t) => {
    await run(t, connections, ['127.0.0.1'])
  })
}

t.test('500 connections from 11 addresses, reset right after the write', async (t) => {
  await run(t, 500, ATTACK_ADDRESSES)
})
