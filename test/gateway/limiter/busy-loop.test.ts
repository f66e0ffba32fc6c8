// docs/decisions.md §7: the store timeout (50 ms) must never fire on a healthy Redis because the event loop
// is busy. Guards the two sources of false timeouts that stores/resilient.ts defends against —
// replies already read by the kernel but not yet by Node (a 100 ms busy loop while replies are in
// flight), and a deep pipeline (2,000 concurrent requests) — by asserting exact admission across two
// gateways with 0 store errors, i.e. 0 answers from the fallback. A naive timer is run as a control.
// The stores run as in production: one write per event-loop turn (stores/redis.ts) and leases on.
// "0 timeouts" is asserted whenever Redis kept answering: a machine busy enough to leave Redis itself
// silent for longer than the timeout makes real timeouts, which the test then prints instead (the
// silence is measured from another process, test/helpers/redis-stalls.ts). Exact admission holds either way.
import t, { type Test } from 'tap'
import { createStore } from '../../../src/gateway/limiter/create-store.js'
import type { LimiterStore } from '../../../src/gateway/limiter/store.js'
import { startBackend } from '../../helpers/backend.js'
import { burst, DEMO_KEYS, plansYaml, startGateway, testConfig } from '../../helpers/gateway.js'
import { startRedis } from '../../helpers/redis.js'
import { watchRedisStalls } from '../../helpers/redis-stalls.js'

const LIMITS = { perMinute: 300, perDay: 10_000 }
const BUSY_MS = 100
/** The repository's plans without bans, so every one of the 2,000 requests reaches Redis. */
const NO_BANS = plansYaml({ ban: { threshold: 1000000 } })

/** The store timeout of these tests (the default). */
const STORE_TIMEOUT_MS = 50

/**
 * `errors` must be all 0 — unless Redis itself kept a client of another process waiting for half
 * the timeout or more (a starved Redis makes real timeouts): then the errors are printed, not asserted.
 */
function noTimeouts (t: Test, errors: number[], redisSlowestMs: number, what: string): void {
  if (redisSlowestMs < STORE_TIMEOUT_MS / 2) {
    t.same(errors, errors.map(() => 0), `${what} (Redis's slowest reply to a probe: ${redisSlowestMs} ms)`)
  } else {
    t.comment(`${what}: not asserted — Redis left a probe waiting ${redisSlowestMs} ms (a busy machine), timeouts seen: ${errors.join(', ')}`)
  }
}

function busyWait (ms: number): void {
  const until = performance.now() + ms
  while (performance.now() < until) { /* the event loop is blocked: replies pile up in the socket */ }
}

t.test('a 100 ms busy loop while 300 replies are in flight: no timeout, no fallback', async (t) => {
  const redis = await startRedis(t)
  const { store, health } = await createStore({ redisUrl: redis.url })
  t.teardown(() => store.close())
  await store.consume('warm-up', LIMITS, null)
  const stalls = watchRedisStalls(redis.port)
  const calls = Array.from({ length: 300 }, (_, i) => store.consume(`busy-${i % 10}`, LIMITS, null))
  busyWait(BUSY_MS)
  const results = await Promise.all(calls)
  const redisSlowestMs = await stalls.stop()
  t.equal(results.filter((r) => r.outcome === 'ok').length, 300)
  noTimeouts(t, [health.errors()], redisSlowestMs, '0 timeouts: every reply that arrived during the busy loop was read first')
  t.equal(health.fallbackActive(), false)
  t.equal(await redis.cli('HLEN', 'rl:{busy-0}:m') !== '0', true, 'counted in Redis')

  // Control: the same scene with a plain setTimeout race times out on every call, which is what
  // the deferred verdict prevents (so this test can tell the two designs apart).
  const naive = Array.from({ length: 300 }, async (_, i) => await Promise.race([
    store.consume(`naive-${i % 10}`, LIMITS, null).then(() => 'reply'),
    new Promise<string>((resolve) => setTimeout(() => resolve('timeout'), 50))
  ]))
  busyWait(BUSY_MS)
  const naiveTimeouts = (await Promise.all(naive)).filter((r) => r === 'timeout').length
  t.ok(naiveTimeouts > 0, 'a plain setTimeout race would have failed over')
  t.comment(`plain setTimeout race: ${naiveTimeouts}/300 false timeouts; resilient store: ${health.errors()}`)
})

/** `store`, whose `n`th consume blocks the event loop right after it was issued. */
function busyAfter (store: LimiterStore, n: number): LimiterStore {
  let calls = 0
  return {
    ...store,
    consume: (id, limits, ban) => {
      const pending = store.consume(id, limits, ban)
      if (++calls === n) busyWait(BUSY_MS)
      return pending
    }
  }
}

t.test('two gateways, one Redis, 50 ms timeout on: exact limit under a busy loop and under 2,000 concurrent requests', async (t) => {
  const redis = await startRedis(t)
  const backend = await startBackend(t)
  const stacks = await Promise.all([0, 1].map(async () => await createStore({ redisUrl: redis.url, storeTimeoutMs: STORE_TIMEOUT_MS })))
  const gateways = await Promise.all(stacks.map(async ({ store, health }) =>
    await startGateway(t, { backendUrl: backend.url, config: testConfig({ 'plans.yaml': NO_BANS }), limiter: { store: busyAfter(store, 150), health } })))

  const errors = (): number[] => gateways.map((gw) => gw.app.limiterStatus.storeErrors())
  let stalls = watchRedisStalls(redis.port)
  const statuses = await burst(gateways, DEMO_KEYS.pro, 400)
  noTimeouts(t, errors(), await stalls.stop(), '0 timeouts, so 0 fallback answers')
  t.equal(statuses.filter((s) => s === 200).length, 300, '400 concurrent for a 300/min key, 100 ms busy loop in flight: exactly 300 admitted')
  t.equal(statuses.filter((s) => s === 429).length, 100)

  const before = errors()
  stalls = watchRedisStalls(redis.port)
  const big = await burst(gateways, DEMO_KEYS.free, 2_000)
  noTimeouts(t, errors().map((n, i) => n - (before[i] ?? 0)), await stalls.stop(), '0 timeouts under the deep pipeline')
  t.equal(big.filter((s) => s === 200).length, 60, '2,000 concurrent for a 60/min key: exactly 60 admitted')
  t.equal(big.filter((s) => s === 429).length, 1_940)
  if (errors().every((n) => n === 0)) t.same(gateways.map((gw) => gw.app.limiterStatus.fallbackActive()), [false, false])
})
