// A busy event loop must not take a healthy Redis for a gone one (docs/decisions.md §7): a call's
// budget (STORE_TIMEOUT_MS) runs out in the timers phase, before the loop reads the replies that
// arrived while it was blocked, so the verdict waits for the end of that turn. With count before
// admit a false verdict could never over-admit — it would send requests to the outage policy — so
// what this guards is availability: 0 store errors, 0 fallback answers, every request decided in
// Redis, through a busy loop longer than the budget and a 2,000-request pipeline. A plain
// setTimeout race is run as the control. "0 timeouts" is asserted whenever Redis kept answering: a
// machine busy enough to leave Redis itself silent for half the budget makes real timeouts, which
// the test then prints instead (measured from another process, test/helpers/redis-stalls.ts).
import t, { type Test } from 'tap'
import { createStore } from '../../../src/gateway/limiter/create-store.js'
import { askOf, type LimiterStore } from '../../../src/gateway/limiter/store.js'
import { startBackend } from '../../helpers/backend.js'
import { burstAnswers, limiterAdmitted, startGateway } from '../../helpers/gateway.js'
import { DEMO_KEYS, plansYaml, testConfig } from '../../helpers/config-fixture.js'
import { startRedis } from '../../helpers/redis.js'
import { watchRedisStalls } from '../../helpers/redis-stalls.js'

const LIMITS = askOf({ perMinute: 300, perDay: 10_000 })
const TIMEOUT_MS = 250
const BUSY_MS = 400
/** The repository's plans without bans, so every one of the 2,000 requests reaches Redis. */
const NO_BANS = plansYaml({ ban: { threshold: 1000000 } })

/** `errors` must be all 0 — unless Redis itself left a probe of another process waiting half the budget or more. */
function noTimeouts (t: Test, errors: number[], redisSlowestMs: number, what: string): void {
  if (redisSlowestMs < TIMEOUT_MS / 2) {
    t.same(errors, errors.map(() => 0), `${what} (Redis's slowest reply to a probe: ${redisSlowestMs} ms)`)
  } else {
    t.comment(`${what}: not asserted — Redis left a probe waiting ${redisSlowestMs} ms (a busy machine), timeouts seen: ${errors.join(', ')}`)
  }
}

function busyWait (ms: number): void {
  const until = performance.now() + ms
  while (performance.now() < until) { /* the event loop is blocked: replies pile up in the socket */ }
}

t.test(`a ${BUSY_MS} ms busy loop (past the ${TIMEOUT_MS} ms budget) while replies are in flight: no timeout, no fallback`, async (t) => {
  const redis = await startRedis(t)
  const store = await createStore({ redisUrl: redis.url, storeTimeoutMs: TIMEOUT_MS })
  t.teardown(() => store.close())
  await store.consume('warm-up', LIMITS)
  const stalls = watchRedisStalls(redis.port)
  const calls = Array.from({ length: 300 }, (_, i) => store.consume(`busy-${i % 10}`, LIMITS))
  busyWait(BUSY_MS)
  const results = await Promise.all(calls)
  const redisSlowestMs = await stalls.stop()
  t.equal(results.filter((r) => r.outcome === 'ok').length, 300)
  noTimeouts(t, [store.health.errors()], redisSlowestMs, '0 timeouts: every reply that arrived during the busy loop was read first')
  if (store.health.errors() === 0) {
    t.equal(store.health.fallbackActive(), false)
    t.ok(results.every((r) => r.via !== 'fallback'), 'every answer decided in Redis')
  }

  // Control: the same scene with a plain setTimeout race times out on every call, which is what
  // the deferred verdict prevents (so this test can tell the two designs apart).
  const naive = Array.from({ length: 300 }, async (_, i) => await Promise.race([
    store.consume(`naive-${i % 10}`, LIMITS).then(() => 'reply'),
    new Promise<string>((resolve) => setTimeout(() => resolve('timeout'), TIMEOUT_MS))
  ]))
  busyWait(BUSY_MS)
  const naiveTimeouts = (await Promise.all(naive)).filter((r) => r === 'timeout').length
  t.ok(naiveTimeouts > 0, 'a plain setTimeout race would have failed over')
  t.comment(`plain setTimeout race: ${naiveTimeouts}/300 false timeouts; the store: ${store.health.errors()}`)
})

/** `store`, whose `n`th consume blocks the event loop right after it was issued. */
function busyAfter (store: LimiterStore, n: number): LimiterStore {
  let calls = 0
  return {
    ...store,
    consume: (id, ask) => {
      const pending = store.consume(id, ask)
      if (++calls === n) busyWait(BUSY_MS)
      return pending
    }
  }
}

t.test('two gateways, one Redis: the limit exactly, and no fallback, under a busy loop and under 2,000 concurrent requests', async (t) => {
  const redis = await startRedis(t)
  const backend = await startBackend(t)
  const stores = await Promise.all([0, 1].map(async () => await createStore({ redisUrl: redis.url, storeTimeoutMs: TIMEOUT_MS })))
  const gateways = await Promise.all(stores.map(async (store) =>
    await startGateway(t, { backendUrl: backend.url, config: testConfig({ 'plans.yaml': NO_BANS }), limiter: { store: busyAfter(store, 150) } })))

  const errors = (): number[] => gateways.map((gw) => gw.app.limiterStatus.storeErrors())
  let stalls = watchRedisStalls(redis.port)
  // Admitted by the limiter: served, or shed after it by the upstream gate when the backend cannot take it in time (load).
  const answers = await burstAnswers(gateways, DEMO_KEYS.pro, 400)
  noTimeouts(t, errors(), await stalls.stop(), '0 timeouts, so 0 fallback answers')
  t.equal(answers.filter(limiterAdmitted).length, 300, `400 concurrent for a 300/min key, a ${BUSY_MS} ms busy loop in flight: exactly 300 admitted (${answers.filter((answer) => answer.status === 200).length} served)`)
  t.equal(answers.filter((answer) => answer.status === 429).length, 100)

  const before = errors()
  stalls = watchRedisStalls(redis.port)
  const big = await burstAnswers(gateways, DEMO_KEYS.free, 2_000)
  noTimeouts(t, errors().map((n, i) => n - (before[i] ?? 0)), await stalls.stop(), '0 timeouts under the deep pipeline')
  t.equal(big.filter(limiterAdmitted).length, 60, `2,000 concurrent for a 60/min key: exactly 60 admitted (${big.filter((answer) => answer.status === 200).length} served)`)
  t.equal(big.filter((answer) => answer.status === 429).length, 1_940)
  if (errors().every((n) => n === 0)) t.same(gateways.map((gw) => gw.app.limiterStatus.fallbackActive()), [false, false])
})
