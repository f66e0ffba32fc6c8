// The quota watch behind gateway_quota_consumers_near_limit: a consumer counts while its latest
// decision is under an hour old and its month's units (the history's count, every process's) are at
// or over 90 % of its perMonth, in the current month only; a late note of an older decision never
// replaces a newer one; entries older than the hour are dropped when read, so the map stays small.
import t from 'tap'
import { countByPlan, createQuotaWatch, NEAR_LIMIT_RECENT_MS } from '../../../src/gateway/history/quota-watch.js'
import type { MonthCell } from '../../../src/gateway/history/tally.js'

const NOW = Date.UTC(2030, 2, 20, 12)

function cell (consumerId: string, plan: string, quota: number, last: number, month = '203003'): MonthCell {
  return { consumerId, month, units: 1, plan, quota, last }
}

t.test('at or over 90 % of the quota, decided within the hour, this month', async (t) => {
  const watch = createQuotaWatch()
  watch.note(cell('under', 'free', 1000, NOW), 899)
  watch.note(cell('at', 'free', 1000, NOW), 900)
  watch.note(cell('over', 'pro', 100, NOW - 1000), 140)
  watch.note(cell('stale', 'free', 1000, NOW - NEAR_LIMIT_RECENT_MS - 1), 999)
  watch.note(cell('last-month', 'free', 1000, NOW, '203002'), 999)
  const near = watch.nearLimit(NOW)
  t.same(near.map((c) => [c.consumerId, c.plan, c.units, c.quota]), [['over', 'pro', 140, 100], ['at', 'free', 900, 1000]], 'most used first')
  t.same([...countByPlan(near)], [['pro', 1], ['free', 1]])

  // A late retry of an older decision does not undo a newer count; a newer one replaces it.
  watch.note(cell('at', 'free', 1000, NOW - 5), 10)
  t.equal(watch.nearLimit(NOW).length, 2)
  watch.note(cell('at', 'free', 1000, NOW + 5), 950)
  t.equal(watch.nearLimit(NOW + 5).find((c) => c.consumerId === 'at')?.units, 950)

  // An hour after their latest decisions nobody counts, and the entries are gone.
  t.same(watch.nearLimit(NOW + NEAR_LIMIT_RECENT_MS + 10), [])
  watch.note(cell('at', 'free', 1000, NOW + NEAR_LIMIT_RECENT_MS + 20), 1)
  t.same(watch.nearLimit(NOW + NEAR_LIMIT_RECENT_MS + 20), [], 'a new count under 90 %')
})

t.test('the quota renews at 00:00 UTC on the 1st: a consumer near March\'s quota no longer counts in April', async (t) => {
  const watch = createQuotaWatch()
  const end = Date.UTC(2030, 3, 1)
  watch.note(cell('acme', 'free', 1000, end - 60_000), 990)
  t.equal(watch.nearLimit(end - 1).length, 1, 'March\'s last millisecond')
  t.equal(watch.nearLimit(end).length, 0, 'April')
})
