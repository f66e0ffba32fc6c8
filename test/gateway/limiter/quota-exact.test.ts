// Exact across processes and through a Redis pause: under STORE_ON_ERROR=strict a consumer with a
// monthly quota gets exactly its quota, never one more and never one less, though its requests are
// spread over two gateway processes and Redis is frozen (SIGSTOP) twice while they run — once past
// STORE_TIMEOUT_MS, so the shards go down and only reserves kept back in Redis answer. First with
// minute, day and month all at 100; then with the month the only window that binds (1,000 a minute
// and a day; 900 of 1,000 units of the month spent on earlier days). Under the shipped default
// (`local`) the outage allowance may also answer a consumer that reaches its limit meanwhile: its
// stated bound is checked instead (at most the allowance over — 10 % of the minute limit for the two
// processes together, STORE_PROCESSES=2 — every admission counted in Redis; runs without
// STORE_PROCESSES, each process taking the whole allowance, saw 105–108 of 100). The answers depend on load and are printed. Every
// refusal is quota_exceeded, a batch's tail past the month too (grant.lua decides whether the month
// is out after counting the batch's admissions). The two strict cases share one redis-server, backend
// and pair of gateway processes (startQuotaRig), each flood on its own consumer: the processes start
// twice for the file, not three times.
import t from 'tap'
import { quotaFlood, startQuotaRig } from '../../helpers/quota-attack.js'
import { allowanceUnits, DEFAULT_OUTAGE_ALLOWANCE_PERCENT } from '../../../src/gateway/limiter/redis/outage.js'

const PAUSES = [{ at: 400, ms: 300 }, { at: 1_000, ms: 800 }]

// Consumer 0: minute, day and month all at 100; consumer 1: the month the only window that binds.
const strict = await startQuotaRig(t, { limits: ['{ perMinute: 100, perDay: 100, perMonth: 100 }', '{ perMinute: 1000, perDay: 1000, perMonth: 1000 }'], policy: 'strict' })

t.test('strict, perMonth 100 (minute and day 100 too): exactly 100 admissions', async (t) => {
  const run = await strict.flood({ consumer: 0, requests: 400, wave: 8, pauses: PAUSES })
  t.comment(`answers ${JSON.stringify(run.answers)}; pauses ${run.paused.join(', ')} ms; month in Redis ${run.monthInRedis}`)
  t.equal(run.paused.length, 2, 'Redis was frozen twice')
  t.equal(run.admitted, 100, 'exactly the quota')
  t.equal(run.monthInRedis, 100, 'and the month counted in Redis is what was admitted')
  t.same(Object.keys(run.answers).filter((a) => a.startsWith('429')), ['429 quota_exceeded'], 'every 429 names the month')
})

t.test('strict, the month alone binds (900 of 1,000 spent before, 1,000 a minute and a day): exactly 100 more', async (t) => {
  const run = await strict.flood({ consumer: 1, planted: 900, requests: 400, wave: 8, pauses: PAUSES })
  t.comment(`answers ${JSON.stringify(run.answers)}; pauses ${run.paused.join(', ')} ms; month in Redis ${run.monthInRedis}`)
  t.equal(run.paused.length, 2, 'Redis was frozen twice')
  t.equal(run.admitted, 100, 'exactly what was left of the quota')
  t.equal(run.monthInRedis, 1000, 'the month in Redis: 900 + 100')
  t.same(Object.keys(run.answers).filter((a) => a.startsWith('429')), ['429 quota_exceeded'], 'every 429 names the month')
})

t.test('local (the shipped default), perMonth 100: at most the outage allowance over, every admission counted', async (t) => {
  const run = await quotaFlood(t, { limits: '{ perMinute: 100, perDay: 100, perMonth: 100 }', requests: 400, wave: 8, pauses: PAUSES, storeProcesses: 2 })
  // The allowance: 10 % of the minute limit for all processes together (STORE_PROCESSES=2: each its half).
  const bound = 100 + 2 * allowanceUnits({ share: DEFAULT_OUTAGE_ALLOWANCE_PERCENT / 100, processes: 2 }, 100)
  t.comment(`answers ${JSON.stringify(run.answers)}; pauses ${run.paused.join(', ')} ms; month in Redis ${run.monthInRedis}; bound ${bound}`)
  t.equal(run.paused.length, 2, 'Redis was frozen twice')
  t.ok(run.admitted >= 100 && run.admitted <= bound, `the quota, and at most the allowance over it: ${run.admitted} (100 … ${bound})`)
  t.equal(run.monthInRedis, run.admitted, 'the month counted in Redis is what was admitted (allowance admissions written back)')
  t.same(Object.keys(run.answers).filter((a) => a.startsWith('429')), ['429 quota_exceeded'], 'every 429 names the month')
})
