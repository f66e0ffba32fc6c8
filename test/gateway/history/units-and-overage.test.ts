// The usage history counts units beside requests (a route's cost) and the overage of a soft quota:
// per consumer and UTC day in a real Redis (fields DDa, DDx only when a cost is over 1, DDr, DDo
// only with overage) and in process memory alike; the month's totals summed from its days; the
// month's units of a consumer with a quota (`u`) told back after each write, every process's added;
// a flush that fails sends each count once more, never twice; and a config without costs or quotas
// writes no field it did not write before.
import t, { type Test } from 'tap'
import { Redis } from 'ioredis'
import type { KeyRecord, Limits } from '../../../src/gateway/config/types.js'
import { DAY_MS, dayOf, daysOfMonth } from '../../../src/gateway/history/days.js'
import { createMemoryHistory } from '../../../src/gateway/history/memory-history.js'
import { createRedisHistory, usageKey } from '../../../src/gateway/history/redis-history.js'
import { USAGE_HISTORY_DAYS, USAGE_KEY_KEEP_DAYS, type HistoryStore } from '../../../src/gateway/history/store.js'
import { DecisionTally, mergeBatches, type MonthCell, type ShadowCell } from '../../../src/gateway/history/tally.js'
import { decide } from '../../../src/gateway/limiter/decide.js'
import { testConfig } from '../../helpers/config-fixture.js'
import { startRedis } from '../../helpers/redis.js'

const SOFT: Limits = { perMinute: 100, perDay: 1_000, perMonth: 20, overage: true }
const PLAIN: Limits = { perMinute: 100, perDay: 1_000 }
const NOW = Date.UTC(2030, 2, 14, 12)

const consumer = (id: string, limits: Limits, plan = 'metered'): KeyRecord => ({ ...testConfig().keysById.get('demo-free')!, consumerId: id, id, plan, limits })

/** One decision of `cost` units at `now`, the month holding `month` units once it is counted (admitted) or as it stood (refused). */
function note (tally: DecisionTally, who: KeyRecord, now: number, cost: number, month: number, allowed = true): void {
  tally.note(who, decide({
    outcome: allowed ? 'ok' : 'rate_limited',
    now,
    minute: { count: 1, resetAt: now + 60_000, retryAt: allowed ? 0 : now + 1_000 },
    day: { count: 1, resetAt: now + DAY_MS, retryAt: 0 },
    month: { count: month, resetAt: Date.UTC(2030, 3, 1), retryAt: 0 },
    bannedUntil: 0
  }, who.limits, who.plan, cost))
}

/** acme, on a soft quota of 20: 5 + 5 + 5 (15), then 5 more (20), then 5 (25: 5 over), then a 1 (26: 1 over) and one refused; yesterday one 5. */
function acmeDay (tally: DecisionTally): void {
  const acme = consumer('acme', SOFT)
  note(tally, acme, NOW - DAY_MS, 5, 5)
  for (const [i, month] of [10, 15, 20, 25].entries()) note(tally, acme, NOW + i, 5, month)
  note(tally, acme, NOW + 10, 1, 26)
  note(tally, acme, NOW + 11, 5, 26, false)
}

async function expectAcme (t: Test, history: HistoryStore): Promise<void> {
  t.same(await history.usage('acme', dayOf(NOW) - 1, dayOf(NOW)), [
    { day: dayOf(NOW) - 1, admitted: 1, units: 5, rejected: 0, overage: 0 },
    { day: dayOf(NOW), admitted: 5, units: 21, rejected: 1, overage: 6 }
  ], 'units beside requests; the overage units of the day (5 of the fourth request, 1 of the fifth)')
  t.same(await history.months('acme', ['203003', '203002']), [
    { month: '203003', units: 26, overage: 6 },
    { month: '203002', units: 0, overage: 0 }
  ], 'the month\'s totals, from every day of it')
}

t.test('in Redis: units and overage per day, the month\'s totals, the fields written and the month\'s units told back', async (t) => {
  const redis = await startRedis(t)
  const history = createRedisHistory(new Redis(redis.url))
  t.teardown(() => history.close())
  const tally = new DecisionTally()
  acmeDay(tally)
  note(tally, consumer('plain', PLAIN, 'free'), NOW, 1, 0)
  note(tally, consumer('plain', PLAIN, 'free'), NOW + 1, 1, 0)
  const told: Array<[string, string, number, string, number]> = []
  t.same(await history.write(tally.drain(), (cell: MonthCell, units: number) => { told.push([cell.consumerId, cell.month, units, cell.plan, cell.quota]) }),
    { usage: [], shadow: [], months: [] }, 'all written')
  await expectAcme(t, history)
  t.same(told, [['acme', '203003', 26, 'metered', 20]], 'the month\'s units of the consumer with a quota, once written; none for a consumer without one')
  t.same(await redis.cli('HGETALL', usageKey('acme', '203003')), ['13a', '1', '13x', '4', '14a', '5', '14x', '16', '14r', '1', '14o', '6', 'u', '26'].join('\n'))
  t.same(await redis.cli('HGETALL', usageKey('plain', '203003')), '14a\n2', 'no cost, no quota: the fields written before units existed, no more')
  const expireAt = Number(await redis.cli('EXPIRETIME', usageKey('acme', '203003')))
  t.equal(expireAt, (daysOfMonth('203003').next + USAGE_KEY_KEEP_DAYS) * 86_400, 'the month\'s hash expires 40 days after the month ends')

  // Another process's flush adds its units; the reply it is told is every process's.
  const other = createRedisHistory(new Redis(redis.url))
  t.teardown(() => other.close())
  const more = new DecisionTally()
  note(more, consumer('acme', SOFT), NOW + 20, 5, 31)
  const seen: number[] = []
  await other.write(more.drain(), (_cell, units) => { seen.push(units) })
  t.same(seen, [31], 'the second process is told 26 + 5')
  t.same(await history.months('acme', ['203003']), [{ month: '203003', units: 31, overage: 11 }])
})

t.test('a flush that fails comes back count by count, and written again adds each once', async (t) => {
  const redis = await startRedis(t)
  const client = new Redis(redis.url, { enableOfflineQueue: false, maxRetriesPerRequest: 1, retryStrategy: () => 50 })
  client.on('error', () => {}) // refused while Redis is down: the test is about what comes back
  const history = createRedisHistory(client)
  t.teardown(() => history.close())
  const tally = new DecisionTally()
  acmeDay(tally)
  await redis.stop()
  let left = await history.write(tally.drain())
  t.same(left.usage.map((c) => [c.admitted, c.units, c.rejected, c.overage]).sort(), [[1, 5, 0, 0], [5, 21, 1, 6]], 'the counts come back, merged per day again')
  t.same(left.months.map((c) => c.units), [26])
  await redis.start()
  let told = 0
  for (let i = 0; i < 100 && (left.usage.length > 0 || left.months.length > 0); i++) {
    left = await history.write(left, (_cell, units) => { told = units })
    if (left.usage.length > 0) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  await expectAcme(t, history)
  t.equal(told, 26)
})

t.test('in process memory: the same counts, and a month\'s totals kept as long as Redis keeps its hash', async (t) => {
  let clock = NOW
  const history = createMemoryHistory({ now: () => clock })
  const tally = new DecisionTally()
  acmeDay(tally)
  const told: number[] = []
  await history.write(tally.drain(), (_cell, units) => { told.push(units) })
  await expectAcme(t, history)
  t.same(told, [26])

  // Past the days served the days go; the month's totals stay until its hash would expire.
  clock = NOW + USAGE_HISTORY_DAYS * DAY_MS
  await history.write({ usage: [], shadow: [], months: [] })
  t.same((await history.usage('acme', dayOf(NOW), dayOf(NOW)))[0], { day: dayOf(NOW), admitted: 0, units: 0, rejected: 0, overage: 0 }, 'the day is no longer served')
  t.same(await history.months('acme', ['203003']), [{ month: '203003', units: 26, overage: 6 }], 'the month still is')
  clock = (daysOfMonth('203003').next + USAGE_KEY_KEEP_DAYS) * DAY_MS
  await history.write({ usage: [], shadow: [], months: [] })
  t.same(await history.months('acme', ['203003']), [{ month: '203003', units: 0, overage: 0 }], 'gone when Redis would expire it')
})

t.test('the tally: a cell per consumer and month with a quota, split at the month\'s end, with the latest plan and quota', async (t) => {
  const tally = new DecisionTally()
  const end = Date.UTC(2030, 3, 1)
  note(tally, consumer('acme', SOFT), end - 1, 2, 2)
  note(tally, consumer('acme', { ...SOFT, perMonth: 50 }, 'bigger'), end, 3, 3)
  note(tally, consumer('acme', SOFT), end + 1, 1, 4, false)
  const batch = tally.drain()
  t.same(batch.months.map((c) => [c.month, c.units, c.plan, c.quota, c.last]), [
    ['203003', 2, 'metered', 20, end - 1],
    ['203004', 3, 'bigger', 50, end]
  ], 'March\'s last millisecond is March; a refused request spends nothing')
  t.same(batch.usage.map((c) => [c.day, c.admitted, c.units, c.rejected]), [[dayOf(end) - 1, 1, 2, 0], [dayOf(end), 1, 3, 1]])
  t.same(tally.drain(), { usage: [], shadow: [], months: [] }, 'drained')
})

t.test('a batch kept after a failed write merged with the next: a month\'s units and a shadow hour\'s counts added, the latest decision\'s plan and quota, cells out of range dropped', async (t) => {
  const month = (units: number, plan: string, quota: number, last: number): MonthCell => ({ consumerId: 'acme', month: '203004', units, plan, quota, last })
  const shadow = (rejections: number, admitted: number, first: number, last: number): ShadowCell =>
    ({ plan: 'free', consumerId: 'acme', hour: 500_000, rejections, admitted, first, last })
  const unsent = { usage: [], months: [month(5, 'bigger', 50, 2_000), { ...month(1, 'old', 1, 10), month: '202901' }], shadow: [shadow(3, 1, 100, 400), { ...shadow(9, 9, 1, 2), hour: 1 }] }
  // The next batch: an earlier decision of the month (drained after, counted before) and a later shadow hour's span.
  const drained = { usage: [], months: [month(2, 'metered', 20, 1_000)], shadow: [shadow(4, 2, 50, 300), shadow(1, 0, 450, 900)] }
  const merged = mergeBatches([unsent, drained], { day: () => true, hour: (hour) => hour > 1, month: (name) => name !== '202901' })
  t.same(merged.months, [month(7, 'bigger', 50, 2_000)], 'one cell: units added, the plan and quota of the latest decision (not of the batch merged last)')
  t.same(merged.shadow, [shadow(8, 3, 50, 900)], 'one cell: rejections and admitted added, first the earliest and last the latest')
  t.same(unsent.months[0], month(5, 'bigger', 50, 2_000), 'the kept batch itself is not changed (a write may still retry it)')

  const later = mergeBatches([{ usage: [], shadow: [], months: [month(5, 'metered', 20, 1_000)] }, { usage: [], shadow: [], months: [month(1, 'bigger', 50, 3_000)] }], { day: () => true, hour: () => true })
  t.same(later.months, [month(6, 'bigger', 50, 3_000)], 'a later decision merged last brings its plan and quota; no month filter keeps every month')
})
