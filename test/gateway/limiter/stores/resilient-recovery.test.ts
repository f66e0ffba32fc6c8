// The resilient store coming back from faults of a real redis-server (createStore wires it as in
// production, leases off so every decision is one call): a call that timed out while Redis was
// frozen is answered by the fallback, and its late reply settles whether Redis counted it; a
// consumer with fallback admissions not yet in Redis stays with the fallback until they are; a
// restart without persistence is re-seeded from what the process knew and gets the fallback's
// admissions back before the first decision there. Redis ends up counting exactly what was admitted.
import t from 'tap'
import { createStore } from '../../../../src/gateway/limiter/create-store.js'
import type { ConsumeResult } from '../../../../src/gateway/limiter/store.js'
import { until } from '../../../helpers/poll.js'
import { startRedis } from '../../../helpers/redis.js'

const LIMITS = { perMinute: 10, perDay: 1_000 }

t.test('frozen Redis: the fallback answers, the late replies settle it, Redis counts what was admitted', async (t) => {
  const redis = await startRedis(t)
  t.teardown(() => redis.signal('SIGCONT'))
  // One call times out (the next is kept from Redis): the breaker, opening at three, stays closed.
  const { store, health } = await createStore({ redisUrl: redis.url, storeLeases: false, storeTimeoutMs: 30 })
  t.teardown(() => store.close())
  const answers: ConsumeResult[] = []
  for (let i = 0; i < 4; i++) answers.push(await store.consume('c', LIMITS, null))
  redis.signal('SIGSTOP')
  const timedOut = await store.consume('c', LIMITS, null)
  t.equal(timedOut.outcome, 'ok', 'timed out: the fallback admits from the 4 it knew')
  t.ok(health.localAnswer(timedOut), 'and says so')
  t.equal(LIMITS.perMinute - timedOut.minute.count, 2, 'remaining: its share of the 6 left (1 process, 1 share kept back) is 3, one taken')
  const queued = await store.consume('c', LIMITS, null)
  t.ok(health.localAnswer(queued), 'the next one too: an admission of it is not in Redis yet')
  answers.push(timedOut, queued)
  redis.signal('SIGCONT')
  await until('back in Redis', async () => !health.localAnswer(await store.peek('c', LIMITS)), 5_000, 20)
  await until('the fallback\'s admissions counted in Redis', async () => Number(await redis.cli('HGET', 'rl:{c}:m', 'n')) === 6, 5_000, 20)
  t.pass('Redis counts 6: the timed-out request once (its late script), the other written back once')
  for (let i = 0; i < 6; i++) answers.push(await store.consume('c', LIMITS, null))
  t.equal(answers.filter((a) => a.outcome === 'ok').length, LIMITS.perMinute, 'exactly the limit admitted in all')
  t.equal(Number(await redis.cli('HGET', 'rl:{c}:m', 'n')), LIMITS.perMinute, 'and exactly that counted')
})

t.test('restart without persistence: re-seeded and written back before the first decision there', async (t) => {
  const redis = await startRedis(t)
  const { store, health } = await createStore({ redisUrl: redis.url, storeLeases: false })
  t.teardown(() => store.close())
  const answers: ConsumeResult[] = []
  for (let i = 0; i < 6; i++) answers.push(await store.consume('c', LIMITS, null))
  await redis.stop()
  await until('the breaker opened', () => health.fallbackActive(), 2_000, 5)
  for (let i = 0; i < 6; i++) answers.push(await store.consume('c', LIMITS, null))
  t.equal(answers.filter((a) => a.outcome === 'ok').length, 8, 'the fallback admitted its share of the 4 left: 2 (one process, one share kept back)')
  await redis.start()
  await until('the breaker closed', () => !health.fallbackActive(), 10_000, 20)
  const counted = Number(await redis.cli('HGET', 'rl:{c}:m', 'n'))
  t.equal(counted, 8, 're-seeded with the 6 known, the 2 written back on top')
  const next = await store.consume('c', LIMITS, null)
  t.same([next.outcome, next.minute.count, health.localAnswer(next)], ['ok', 9, false], 'so the first decision there counts the 9th')
  t.equal(await redis.cli('EXISTS', 'petstore:epoch:{0}'), '1', 'a new epoch marker')
})
