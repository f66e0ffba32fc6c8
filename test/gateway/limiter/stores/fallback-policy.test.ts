// What answers while Redis fails, per STORE_ON_ERROR: the in-process store (local), an admission
// with nothing counted (open), or a refusal the limiter turns into 503 (closed); and readiness.
import t from 'tap'
import { createFallbackPolicy, StoreUnavailableError } from '../../../../src/gateway/limiter/stores/fallback-policy.js'
import { createMemoryStore } from '../../../../src/gateway/limiter/stores/memory.js'

const NOW = Date.UTC(2030, 0, 1, 12, 0, 0, 500)
const LIMITS = { perMinute: 2, perDay: 100 }

t.test('local: the in-process store decides and counts, per process', async (t) => {
  const local = createMemoryStore({ now: () => NOW })
  const policy = createFallbackPolicy('local', local, () => NOW)
  const outcomes = []
  for (let i = 0; i < 3; i++) outcomes.push((await policy.consume('k', LIMITS, null, 'timeout')).outcome)
  t.same(outcomes, ['ok', 'ok', 'rate_limited'])
  t.equal((await policy.peek('k', LIMITS, 'timeout')).minute.count, 2)
  t.equal(policy.state('timeout'), 'fallback', 'still ready: requests are answered')
  t.equal(policy.local, local)
})

t.test('open: admitted, nothing known, the full limits left', async (t) => {
  const policy = createFallbackPolicy('open', createMemoryStore(), () => NOW)
  for (const result of [await policy.consume('k', LIMITS, null, 'timeout'), await policy.peek('k', LIMITS, 'timeout')]) {
    t.same(result, {
      outcome: 'ok',
      now: NOW,
      minute: { count: 0, resetAt: (Math.floor(NOW / 1000) + 61) * 1000, retryAt: 0 },
      day: { count: 0, resetAt: (Math.floor(NOW / 900_000) + 97) * 900_000, retryAt: 0 },
      bannedUntil: 0
    })
  }
  t.equal(policy.state('timeout'), 'fallback')
})

t.test('closed: refused with the reason, and not ready', async (t) => {
  const policy = createFallbackPolicy('closed', createMemoryStore(), () => NOW)
  await t.rejects(policy.consume('k', LIMITS, null, 'limiter store circuit open'), new StoreUnavailableError('limiter store circuit open'))
  await t.rejects(policy.peek('k', LIMITS, 'no answer'), StoreUnavailableError)
  t.throws(() => policy.state('no answer'), { name: 'StoreUnavailableError', message: 'down: no answer' })
})
