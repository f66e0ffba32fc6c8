// Exact across processes and through a Redis pause: a consumer with a monthly quota gets exactly its
// quota, never one more and never one less, though its requests are spread over two gateway
// processes and Redis is frozen (SIGSTOP) twice while they run — once past STORE_TIMEOUT_MS, so the
// shards go down and STORE_ON_ERROR=local (the shipped default) answers from reserves kept back in
// Redis. First with minute, day and month all at 100; then with the month the only window that binds
// (1,000 a minute and a day; 900 of 1,000 units of the month spent on earlier days). The answers
// depend on load and are printed.
//
// Every refusal should be quota_exceeded, and is not yet: when one process's batch of requests for
// the consumer holds more than the month has room for, grant.lua admits what fits and answers the
// rest as over a shorter window (rate_limited, Retry-After 1 or the minute's, counted toward a ban),
// because it decides whether the month is out before counting the batch's admissions. A defect of
// the limiter's core script (src/gateway/limiter/lua/grant.lua), shown here on every run as a todo
// until it is fixed there; computing `quota_out` after the admissions makes these checks pass.
import t from 'tap'
import { quotaFlood } from '../../helpers/quota-attack.js'

const PAUSES = [{ at: 400, ms: 300 }, { at: 1_000, ms: 800 }]
const BATCH_TAIL_DEFECT = 'grant.lua decides quota_out before counting the batch\'s admissions: a batch\'s tail past the month is answered rate_limited'

t.test('perMonth 100 (minute and day 100 too): exactly 100 admissions', async (t) => {
  const run = await quotaFlood(t, { limits: '{ perMinute: 100, perDay: 100, perMonth: 100 }', requests: 400, wave: 8, pauses: PAUSES })
  t.comment(`answers ${JSON.stringify(run.answers)}; pauses ${run.paused.join(', ')} ms; month in Redis ${run.monthInRedis}`)
  t.equal(run.paused.length, 2, 'Redis was frozen twice')
  t.equal(run.admitted, 100, 'exactly the quota')
  t.equal(run.monthInRedis, 100, 'and the month counted in Redis is what was admitted')
  t.same(Object.keys(run.answers).filter((a) => a.startsWith('429')), ['429 quota_exceeded'], 'every 429 names the month', { todo: BATCH_TAIL_DEFECT })
})

t.test('the month alone binds (900 of 1,000 spent before, 1,000 a minute and a day): exactly 100 more', async (t) => {
  const run = await quotaFlood(t, { limits: '{ perMinute: 1000, perDay: 1000, perMonth: 1000 }', planted: 900, requests: 400, wave: 8, pauses: PAUSES })
  t.comment(`answers ${JSON.stringify(run.answers)}; pauses ${run.paused.join(', ')} ms; month in Redis ${run.monthInRedis}`)
  t.equal(run.paused.length, 2, 'Redis was frozen twice')
  t.equal(run.admitted, 100, 'exactly what was left of the quota')
  t.equal(run.monthInRedis, 1000, 'the month in Redis: 900 + 100')
  t.same(Object.keys(run.answers).filter((a) => a.startsWith('429')), ['429 quota_exceeded'], 'every 429 names the month', { todo: BATCH_TAIL_DEFECT })
})
