// The lease table's two parts on injected clocks: the per-consumer rate meter (this second or the
// last, whichever is busier; room remembered for this second only, reading it changes nothing) and
// the table (spending a block as the script would have answered each request, its deadline, its
// limits, and what an ended lease hands back).
import t from 'tap'
import { createConsumerRate } from '../../../../src/gateway/limiter/stores/consumer-rate.js'
import { createLeaseTable } from '../../../../src/gateway/limiter/stores/lease-table.js'
import type { ConsumeResult } from '../../../../src/gateway/limiter/store.js'

t.test('rate meter: requests in this second or the last; room for this second only', async (t) => {
  const clock = { now: 10_000_100 }
  const rates = createConsumerRate(() => clock.now)
  t.same([rates.hit('a'), rates.hit('a'), rates.hit('a'), rates.hit('b')], [1, 2, 3, 1])
  rates.noteRoom('a', 7)
  t.equal(rates.roomOf('a'), 7)
  clock.now += 1_000
  t.equal(rates.roomOf('a'), undefined, 'a new second: no room known')
  t.equal(rates.roomOf('a'), undefined, 'asking twice changes nothing')
  t.equal(rates.hit('a'), 3, 'the last second was busier')
  t.same([rates.hit('a'), rates.hit('a'), rates.hit('a')], [3, 3, 4])
  clock.now += 2_000
  t.equal(rates.hit('a'), 1, 'a second skipped: nothing carried over')
})

function grant (now: number, minuteCount: number): ConsumeResult {
  return { outcome: 'ok', now, minute: { count: minuteCount, resetAt: now + 61_000, retryAt: 0 }, day: { count: minuteCount, resetAt: now + 97 * 900_000, retryAt: 0 }, bannedUntil: 0 }
}

t.test('lease table: a block spent as the script would answer each request, until its deadline', async (t) => {
  const clock = { now: 500 }
  const table = createLeaseTable(() => clock.now)
  const limits = { perMinute: 100, perDay: 1_000 }
  // A block of 4 granted at Redis time 7_000_250 (counts include the whole block), the first admission used.
  table.hold('a', { limits, minuteBucket: 7_000, dayBucket: 7, granted: 4, used: 1, deadline: 1_240, sentAt: 500, result: grant(7_000_250, 14) })
  t.equal(table.take('a', { ...limits }), undefined, 'other limits (a reload): not from this lease')
  clock.now = 600
  t.match(table.take('a', limits), { outcome: 'ok', now: 7_000_350, minute: { count: 12 }, day: { count: 12 } }, 'count = Redis count − admissions not yet spent')
  t.equal(table.take('a', limits)?.minute.count, 13)
  t.same(table.retireEnded(), [], 'not ended yet')
  clock.now = 1_240
  t.equal(table.take('a', limits), undefined, 'past its deadline: no admission')
  t.same(table.retireEnded(), [['a', { minuteBucket: 7_000, dayBucket: 7, count: 1 }]], 'the one left unspent goes back')
  t.equal(table.size, 0)

  clock.now = 2_000
  table.hold('b', { limits, minuteBucket: 7_001, dayBucket: 7, granted: 2, used: 1, deadline: 2_900, sentAt: 2_000, result: grant(7_001_100, 2) })
  t.equal(table.take('b', limits)?.minute.count, 2)
  t.equal(table.take('b', limits), undefined, 'spent')
  t.equal(table.retire('b'), undefined, 'a spent lease hands nothing back')
  table.hold('c', { limits, minuteBucket: 7_001, dayBucket: 7, granted: 5, used: 1, deadline: 2_900, sentAt: 2_000, result: grant(7_001_100, 5) })
  table.hold('d', { limits, minuteBucket: 7_001, dayBucket: 7, granted: 5, used: 1, deadline: 2_900, sentAt: 2_000, result: grant(7_001_100, 5) })
  table.drop('c')
  t.same(table.retireAll(), [['d', { minuteBucket: 7_001, dayBucket: 7, count: 4 }]], 'a dropped lease (reset) hands nothing back; the others do')
})
