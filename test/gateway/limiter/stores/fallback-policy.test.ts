// What answers while Redis fails, per STORE_ON_ERROR: this process from what it knew (local: a
// real local fallback over a real knowledge, ledger and in-process store), an admission with
// nothing counted (open), or a refusal the limiter turns into 503 (closed); and readiness.
import t from 'tap'
import { createFallbackPolicy, StoreUnavailableError } from '../../../../src/gateway/limiter/stores/fallback-policy.js'
import { createKnowledge } from '../../../../src/gateway/limiter/stores/knowledge.js'
import { createLocalFallback } from '../../../../src/gateway/limiter/stores/local-fallback.js'
import { createMemoryStore } from '../../../../src/gateway/limiter/stores/memory.js'
import { createLedger } from '../../../../src/gateway/limiter/stores/write-back.js'
import type { ConsumeResult } from '../../../../src/gateway/limiter/store.js'

const NOW = Date.UTC(2030, 0, 1, 12, 0, 0, 500)
const LIMITS = { perMinute: 10, perDay: 100 }

function localFallback (): ReturnType<typeof createLocalFallback> {
  const knowledge = createKnowledge({ shardOf: () => '', now: () => NOW })
  const reply: ConsumeResult = { outcome: 'ok', now: NOW, minute: { count: 4, resetAt: 0, retryAt: 0 }, day: { count: 4, resetAt: 0, retryAt: 0 }, bannedUntil: 0 }
  knowledge.learn('k', reply, NOW)
  const store = createMemoryStore({ now: () => NOW })
  const ledger = createLedger({ send: async () => NOW, canSend: () => false })
  return createLocalFallback({ knowledge, ledger, processes: () => 2, shardOf: () => '', failedSince: () => NOW, store: () => store, now: () => NOW })
}

t.test('local: decided from the count this process knew, its share of the room left', async (t) => {
  const policy = createFallbackPolicy('local', localFallback(), () => NOW)
  const outcomes = []
  for (let i = 0; i < 3; i++) outcomes.push((await policy.consume('k', LIMITS, null, 'timeout')).outcome)
  t.same(outcomes, ['ok', 'ok', 'rate_limited'], '4 of 10 known, 2 processes and a share kept back: 2 admitted here')
  t.equal((await policy.peek('k', LIMITS, 'timeout')).outcome, 'rate_limited')
  t.equal(policy.state('timeout'), 'fallback', 'still ready: requests are answered')
})

t.test('open: admitted, nothing known, the full limits left', async (t) => {
  const policy = createFallbackPolicy('open', localFallback(), () => NOW)
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
  const policy = createFallbackPolicy('closed', localFallback(), () => NOW)
  await t.rejects(policy.consume('k', LIMITS, null, 'limiter store circuit open'), new StoreUnavailableError('limiter store circuit open'))
  await t.rejects(policy.peek('k', LIMITS, 'no answer'), StoreUnavailableError)
  t.throws(() => policy.state('no answer'), { name: 'StoreUnavailableError', message: 'down: no answer' })
})
