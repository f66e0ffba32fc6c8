// Load shedding at the edge (issue 26, finding 3: overload queued instead of shedding). The gateway
// runs in this process, so blocking this event loop blocks the gateway's: a loop kept busy turn
// after turn is what an overloaded gateway looks like from inside. The backend holds the admitted
// requests, so they stay in flight — a standing queue — while the excess arrives. The
// throughput/latency target under wrk -c1000 is measured by bench/overload.ts, not here; that a
// burst is not taken for overload is test/gateway/edge/burst-shedding.test.ts (and the unit cases
// at the end).
import { performance } from 'node:perf_hooks'
import t, { type Test } from 'tap'
import { Pool } from 'undici'
import { ConcurrencyLimit, MAX_CONCURRENCY_LIMIT, DEFAULT_MIN_CONCURRENCY_LIMIT } from '../../../src/gateway/edge/concurrency-limit.js'
import { startHeldUpstream, type HeldUpstream } from '../../helpers/echo-upstream.js'
import { startGateway, type StartedGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS } from '../../helpers/config-fixture.js'
import { until } from '../../helpers/poll.js'
import { sampleValue, scrape } from '../../helpers/scrape.js'

const BURST = DEFAULT_MIN_CONCURRENCY_LIMIT + 36
/** How long the delay must stay over target before shedding starts: short, for the test's sake. */
const INTERVAL_MS = 200

interface Answer { status: number, headers: Record<string, string | string[] | undefined>, body: Record<string, unknown> }

async function get (pool: Pool, key: string): Promise<Answer> {
  const res = await pool.request({ path: '/v1/pets', method: 'GET', headers: bearer(key) })
  return { status: res.statusCode, headers: res.headers, body: await res.body.json() as Record<string, unknown> }
}

function busy (ms: number): void {
  const end = performance.now() + ms
  while (performance.now() < end) { /* the gateway's loop is this one */ }
}

function assertShed (t: Test, answer: Answer, limit: string): void {
  t.strictSame(answer.body, { code: 'unavailable', message: 'The gateway is over capacity; retry after 1 s', status: 503 })
  t.equal(answer.headers['retry-after'], '1')
  t.equal(answer.headers['x-ratelimit-limit'], limit, 'the consumer\'s policy')
  t.equal(answer.headers['x-ratelimit-remaining'], '0', 'nothing until Retry-After')
  t.ok(answer.headers.ratelimit !== undefined && answer.headers['ratelimit-policy'] !== undefined)
  t.match(answer.headers['x-request-id'], /^[0-9a-f-]{36}$/)
}

async function burst (gw: StartedGateway, key: string, n: number): Promise<Answer[]> {
  const pool = new Pool(gw.url, { connections: n })
  const answers = await Promise.all(Array.from({ length: n }, async () => await get(pool, key)))
  await pool.close()
  return answers
}

/**
 * A gateway whose loop delay the test sets (here over the target) with a standing queue — BURST
 * requests of the Business key held by the backend — and its limit already cut to the minimum.
 */
async function overloaded (t: Test): Promise<{ gw: StartedGateway, backend: HeldUpstream, loopDelay: (ms: number) => void, queue: Promise<Answer[]> }> {
  let delay = 100
  const backend = await startHeldUpstream(t)
  const gw = await startGateway(t, { backendUrl: backend.url, loadShedding: { queueDelayMs: 20, windowMs: 20, intervalMs: INTERVAL_MS, loopDelay: () => delay } })
  const queue = burst(gw, DEMO_KEYS.business, BURST)
  await settled(gw, BURST)
  t.equal(gw.app.loadShedding.shed, 0, 'the queue itself was admitted: nothing is shed before a whole interval over target')
  await until('the limit cut', () => gw.app.loadShedding.limit === DEFAULT_MIN_CONCURRENCY_LIMIT, 5_000)
  return { gw, backend, loopDelay: (ms) => { delay = ms }, queue }
}

/** Until every request of a burst of `n` is either in flight or shed. */
async function settled (gw: StartedGateway, n: number, shedBefore = 0): Promise<void> {
  await until('the burst admitted or shed', () => gw.app.loadShedding.inFlight + gw.app.loadShedding.shed - shedBefore >= n, 10_000)
}

t.test('an event loop kept busy turn after turn with a standing queue: the excess over the limit is 503 + Retry-After, counted, never sent upstream', async (t) => {
  const backend = await startHeldUpstream(t)
  const gw = await startGateway(t, { backendUrl: backend.url, loadShedding: { queueDelayMs: 20, windowMs: 50, intervalMs: INTERVAL_MS } })
  t.equal(gw.app.loadShedding.limit, MAX_CONCURRENCY_LIMIT, 'no limit before any overload')
  const queued = burst(gw, DEMO_KEYS.business, BURST)
  await settled(gw, BURST)
  t.equal(gw.app.loadShedding.shed, 0, 'the first requests are all admitted')
  // Busy turns of 40 ms: the loop's median delay is twice the target, window after window.
  let blocking = true
  const load = (async () => { while (blocking) { busy(40); await new Promise((resolve) => setImmediate(resolve)) } })()
  await until('the limit cut', () => gw.app.loadShedding.limit === DEFAULT_MIN_CONCURRENCY_LIMIT, 5_000)
  const excess = burst(gw, DEMO_KEYS.business, 36)
  await settled(gw, BURST + 36)
  blocking = false
  await load
  backend.release()
  t.equal((await queued).filter((a) => a.status === 200).length, BURST, 'the standing queue served')
  const shed = await excess
  t.equal(shed.filter((a) => a.status === 503).length, 36, 'the excess, arriving over the limit, shed')
  for (const answer of shed) assertShed(t, answer, '1000')

  // The loop is free again, so the limit may grow back while the scrape is answered: the gauge is the limit at the
  // scrape, between what it was just before and just after it (a paired run read 64 in the gauge and 100,000 after).
  const limitBefore = gw.app.loadShedding.limit
  const { samples } = await scrape(gw.adminUrl)
  const limitAfter = gw.app.loadShedding.limit
  t.equal(sampleValue(samples, 'gateway_shed_requests_total', { reason: 'overload' }), shed.length)
  t.equal(sampleValue(samples, 'gateway_requests_total', { route: '/v1/pets', method: 'GET', status: '503', plan: 'business' }), shed.length)
  t.equal(sampleValue(samples, 'gateway_ratelimit_rejections_total', { plan: 'business', window: 'minute' }), 0)
  const gauge = sampleValue(samples, 'gateway_concurrency_limit')
  t.ok(gauge !== undefined && gauge >= Math.min(limitBefore, limitAfter) && gauge <= Math.max(limitBefore, limitAfter),
    `the gauge is the limit at the scrape: ${gauge} (${limitBefore} just before it, ${limitAfter} just after)`)
  const line = gw.logs.find((l) => l.msg === 'request' && l.status === 503)
  t.match(line, { plan: 'business', keyId: 'demo-business', upstreamMs: null }, 'logged, never sent upstream')
  t.notOk(line?.rateLimit, 'never reached the limiter')

  // Once the loop is free again, the limit grows back as soon as traffic reaches it.
  await until('the limit back over the burst', async () => {
    const again = await burst(gw, DEMO_KEYS.business, BURST)
    return again.every((a) => a.status === 200)
  }, 10_000, 50)
})

t.test('at the limit, a consumer holding less than its share is still served: one client\'s flood does not take everyone\'s capacity', async (t) => {
  const { gw, backend, queue } = await overloaded(t)
  const more = burst(gw, DEMO_KEYS.business, 10)
  await settled(gw, BURST + 10)
  const other = new Pool(gw.url, { connections: 1 })
  const light = get(other, DEMO_KEYS.pro)
  await until('the other consumer admitted', () => gw.app.loadShedding.inFlight === BURST + 1, 5_000)
  backend.release()
  t.equal((await light).status, 200, 'another consumer, nothing in flight: admitted over the limit')
  t.same((await more).map((a) => a.status), Array.from({ length: 10 }, () => 503), 'the flooding consumer shed beyond the limit')
  await queue
  await other.close()
})

t.test('a shed connection is not read again before its Retry-After; a well-behaved client that waits is served', async (t) => {
  const { gw, backend, loopDelay, queue: flood } = await overloaded(t)
  const one = new Pool(gw.url, { connections: 1, pipelining: 1 })
  t.equal((await get(one, DEMO_KEYS.business)).status, 503)
  const shedAt = performance.now()
  // Sent at once, as a client ignoring Retry-After would: it waits, unread, on that connection.
  const second = get(one, DEMO_KEYS.business)
  backend.release()
  loopDelay(0)
  await flood
  const answer = await second
  const waited = performance.now() - shedAt
  t.ok(waited >= 450, `the next request on that connection was read only after at least half the Retry-After (${Math.round(waited)} ms)`)
  t.equal(answer.status, 200, 'and then served: nothing lost')
  await one.close()
})

t.test('a standing queue for the backend\'s connections cuts the limit too, with the loop idle: the excess is shed at the edge, not queued', async (t) => {
  const backend = await startHeldUpstream(t)
  const connections = 2
  const gw = await startGateway(t, { backendUrl: backend.url, upstreamConnections: connections, loadShedding: { queueDelayMs: 20, windowMs: 20, intervalMs: INTERVAL_MS, loopDelay: () => 0 } })
  const waiting = burst(gw, DEMO_KEYS.business, 10)
  await until('2 sent, 8 waiting for a connection', () => gw.app.upstream.inFlight === connections && gw.app.upstream.queued === 8, 5_000)
  await until('the limit cut to the backend\'s connections', () => gw.app.loadShedding.limit === connections, 5_000)
  const more = await burst(gw, DEMO_KEYS.business, 5)
  t.same(more.map((a) => a.status), [503, 503, 503, 503, 503], 'the excess is answered at once')
  for (const answer of more) assertShed(t, answer, '1000')
  t.equal(gw.app.upstream.queued, 8, 'and never joined the queue')
  backend.release()
  t.same((await waiting).map((a) => a.status), Array.from({ length: 10 }, () => 200), 'those already waiting are served')
})

t.test('the limit: nothing shed before a whole interval over target with a queue; then cut from what was in flight, never under the minimum; raised while under target; an interval of calm ends it', async (t) => {
  // Windows of 100 ms, an interval of 1 s: 10 windows.
  const limit = new ConcurrencyLimit({ targetMs: 20, windowMs: 100, intervalMs: 1_000 })
  for (let i = 0; i < 200; i++) t.ok(limit.admit('a'))
  for (let i = 0; i < 9; i++) limit.adapt(30)
  t.equal(limit.limit, MAX_CONCURRENCY_LIMIT, 'over target for 9 windows: a burst still draining, nothing shed')
  limit.adapt(5)
  for (let i = 0; i < 9; i++) limit.adapt(30)
  t.equal(limit.limit, MAX_CONCURRENCY_LIMIT, 'one window under target starts the interval again')
  limit.adapt(30)
  t.equal(limit.limit, 150, 'a whole interval over target: three quarters of the 200 in flight')
  limit.adapt(30)
  t.equal(limit.limit, 112, 'while shedding, cut every window over target')
  for (let i = 0; i < 5; i++) limit.adapt(30)
  t.equal(limit.limit, DEFAULT_MIN_CONCURRENCY_LIMIT)
  limit.adapt(5)
  t.equal(limit.limit, 2 * DEFAULT_MIN_CONCURRENCY_LIMIT, 'in flight above the limit and the delay far under target: doubled')
  limit.adapt(15)
  t.equal(limit.limit, Math.ceil(2 * DEFAULT_MIN_CONCURRENCY_LIMIT * 1.1), 'under the target but not far under: +10 %')
  for (let i = 0; i < 200; i++) limit.done('a')
  limit.adapt(5)
  const held = limit.limit
  for (let i = 0; i < 9; i++) limit.adapt(5)
  t.equal(limit.limit, held, 'traffic under the limit: no change within an interval')
  limit.adapt(5)
  t.equal(limit.limit, MAX_CONCURRENCY_LIMIT, 'an interval under target without reaching the limit: shedding is over')
  for (let i = 0; i < 1000; i++) limit.admit('a')
  for (let i = 0; i < 10; i++) limit.adapt(30)
  t.equal(limit.limit, Math.floor(2 * held * 0.75), 'overload again: after the interval, cut from twice where the last shedding ended, not from the 1,000 in flight')

  const burst = new ConcurrencyLimit({ targetMs: 20, windowMs: 100, intervalMs: 1_000 })
  for (let i = 0; i < 300; i++) burst.admit('a')
  burst.adapt(30)
  for (let w = 0; w < 30; w++) {
    for (let i = 0; i < 10; i++) burst.done('a')
    burst.adapt(500)
  }
  t.equal(burst.limit, MAX_CONCURRENCY_LIMIT, 'a burst draining (answers, no arrivals) for 3 s with the delay far over target: never cut')

  const neighbour = new ConcurrencyLimit({ targetMs: 20, windowMs: 100, intervalMs: 1_000 })
  for (let i = 0; i < DEFAULT_MIN_CONCURRENCY_LIMIT; i++) neighbour.admit('a')
  for (let i = 0; i < 50; i++) neighbour.adapt(80)
  t.equal(neighbour.limit, MAX_CONCURRENCY_LIMIT, 'a slow loop with no more in flight than the backend takes (a neighbour\'s doing): never cut')

  const shares = new ConcurrencyLimit({ targetMs: 20 })
  shares.limit = 4
  t.same(['a', 'a', 'a', 'a', 'a'].map((c) => shares.admit(c)), [true, true, true, true, false], 'one client: the whole limit')
  t.ok(shares.admit('b'), 'a second client holding nothing: under its share of 2')
  t.ok(shares.admit('b'))
  t.notOk(shares.admit('b'), 'at its share')
  t.equal(shares.shed, 2)
  for (let i = 0; i < 4; i++) shares.done('a')
  t.ok(shares.admit('a'), 'under the limit again')
})
