// The bounded call on its own: a reply within the budget, a call that never answers, a call that
// fails, the verdict after the poll phase (a real redis-server's reply read although the event loop
// was blocked past the budget) and the budget without progress (postponed while the shard answers
// others, capped).
import { Redis } from 'ioredis'
import t from 'tap'
import { boundedCall, StoreTimeoutError, type Progress } from '../../../../src/gateway/limiter/stores/bounded-call.js'
import { startRedis } from '../../../helpers/redis.js'

const never = (): Promise<never> => new Promise<never>(() => {})

function busyWait (ms: number): void {
  const until = performance.now() + ms
  while (performance.now() < until) { /* the event loop is blocked */ }
}

t.test('a reply within the budget resolves and marks the shard\'s progress', async (t) => {
  const progress: Progress = { lastReplyAt: 0 }
  const value = await boundedCall(async () => await new Promise<string>((resolve) => setTimeout(() => resolve('reply'), 5)), { budgetMs: 50, capMs: 250, progress })
  t.equal(value, 'reply')
  t.ok(progress.lastReplyAt > Date.now() - 1_000, 'the reply is recorded as progress')
})

t.test('a call that never answers fails after its budget; a failing call fails with its own error', async (t) => {
  const started = performance.now()
  await t.rejects(boundedCall(never, { budgetMs: 40, capMs: 250 }), StoreTimeoutError)
  const took = performance.now() - started
  t.ok(took >= 39 && took < 1_000, `rejected after the budget (${took.toFixed(0)} ms)`)
  await t.rejects(boundedCall(async () => { throw new Error('connection refused') }, { budgetMs: 40, capMs: 250 }), /connection refused/)
  await t.rejects(boundedCall(() => { throw new Error('thrown before any promise') }, { budgetMs: 40, capMs: 250 }), /thrown before/)
  await t.rejects(boundedCall(async () => { throw 'not an Error' }, { budgetMs: 40, capMs: 250 }), /not an Error/)
})

t.test('the verdict waits for the poll phase: a reply already received when the budget ran out is no timeout', async (t) => {
  const redis = await startRedis(t)
  const client = new Redis(redis.url)
  t.teardown(() => { client.disconnect() })
  await client.ping()
  const bounded = boundedCall(() => client.ping(), { budgetMs: 50, capMs: 250 })
  const naive = Promise.race([client.ping().then(() => 'reply'), new Promise<string>((resolve) => setTimeout(() => resolve('timeout'), 50))])
  busyWait(100) // Redis answers both within a millisecond; the replies wait in the socket buffer
  t.equal(await bounded, 'PONG', 'the bounded call got its reply')
  t.equal(await naive, 'timeout', 'a plain timer race would have failed over (the control)')
})

t.test('budget without progress: postponed while the shard answers others, failed once it is quiet, capped', async (t) => {
  const progress: Progress = { lastReplyAt: Date.now() }
  const ticking = setInterval(() => { progress.lastReplyAt = Date.now() }, 10)
  const started = performance.now()
  const queued = boundedCall(never, { budgetMs: 40, capMs: 1_000, progress })
  setTimeout(() => { clearInterval(ticking) }, 150)
  await t.rejects(queued, StoreTimeoutError)
  const took = performance.now() - started
  t.ok(took >= 180 && took < 1_000, `failed ~40 ms after the shard went quiet at 150 ms (${took.toFixed(0)} ms)`)

  const busy: Progress = { lastReplyAt: Date.now() }
  const forever = setInterval(() => { busy.lastReplyAt = Date.now() }, 10)
  t.teardown(() => { clearInterval(forever) })
  const capStart = performance.now()
  await t.rejects(boundedCall(never, { budgetMs: 40, capMs: 200, progress: busy }), StoreTimeoutError)
  const capped = performance.now() - capStart
  t.ok(capped >= 195 && capped < 1_000, `capped at 200 ms although the shard kept answering (${capped.toFixed(0)} ms)`)
})

t.test('the calls of one turn on one shard share one timer: a reply to one leaves the others bounded', async (t) => {
  const progress: Progress = { lastReplyAt: 0 }
  const started = performance.now()
  const answered = boundedCall(async () => await new Promise<string>((resolve) => setTimeout(() => resolve('early'), 5)), { budgetMs: 40, capMs: 250, progress })
  const silent = boundedCall(never, { budgetMs: 40, capMs: 250, progress })
  t.equal(await answered, 'early')
  // The early reply is progress: the silent call fails once the shard has been quiet for the budget.
  await t.rejects(silent, StoreTimeoutError)
  const took = performance.now() - started
  t.ok(took >= 39 && took < 1_000, `the silent call of the same turn still failed after its budget (${took.toFixed(0)} ms)`)

  const next: Progress = { lastReplyAt: 0 }
  const all = await Promise.all([1, 2, 3].map(async (n) => await boundedCall(async () => await Promise.resolve(n), { budgetMs: 40, capMs: 250, progress: next })))
  t.same(all, [1, 2, 3], 'every call of a turn gets its own reply')
})
