// The in-process history drops what aged out with a full pass only when the hour of the clock has
// moved; a write within the same hour checks just the consumers and plans it touched. Both must drop
// exactly what a full pass at every write dropped: old days of a consumer the write touched (same
// hour), and old days of consumers it did not touch once the hour moves.
import t from 'tap'
import { createMemoryHistory } from '../../../src/gateway/history/memory-history.js'
import { DAY_MS, dayOf, HOUR_MS, hourOf } from '../../../src/gateway/history/days.js'
import { USAGE_HISTORY_DAYS } from '../../../src/gateway/history/store.js'
import type { ShadowCell, UsageCell } from '../../../src/gateway/history/tally.js'

const NOW = Date.UTC(2030, 5, 15, 23, 30)
const cell = (consumerId: string, day: number, admitted: number): UsageCell => ({ consumerId, day, admitted, units: admitted, rejected: 0, overage: 0 })
const shadowCell = (plan: string, consumerId: string, hour: number): ShadowCell => ({ plan, consumerId, hour, rejections: 1, admitted: 1, first: hour * HOUR_MS, last: hour * HOUR_MS })
const none = (day: number): unknown => [{ day, admitted: 0, units: 0, rejected: 0, overage: 0 }]

t.test('within one hour: the touched consumer loses a day already out of range; the others keep theirs', async (t) => {
  const clock = NOW
  const history = createMemoryHistory({ now: () => clock })
  const today = dayOf(NOW)
  const oldest = today - USAGE_HISTORY_DAYS + 1
  const consumers = Array.from({ length: 1_000 }, (_, i) => cell(`c${i}`, oldest, 1))
  await history.write({ usage: consumers, shadow: [], months: [] })
  await history.write({ usage: [cell('late', oldest - 1, 4), cell('late', today, 2)], shadow: [shadowCell('free', 'late', hourOf(NOW) - 25)], months: [] })
  t.same(await history.usage('late', oldest - 1, oldest - 1), none(oldest - 1), 'a day past the 35 served, written this hour, is gone')
  t.same(await history.usage('late', today, today), [{ day: today, admitted: 2, units: 2, rejected: 0, overage: 0 }])
  t.same((await history.shadow('free', hourOf(NOW) - 48, hourOf(NOW), 5)).consumers, 0, 'a shadow hour past the window, written this hour, is gone with its consumer count')
  t.same(await history.usage('c999', oldest, oldest), [{ day: oldest, admitted: 1, units: 1, rejected: 0, overage: 0 }], 'an untouched consumer keeps its oldest served day')
})

t.test('once the hour moves: consumers the write did not touch are pruned too', async (t) => {
  let clock = NOW
  const history = createMemoryHistory({ now: () => clock })
  const today = dayOf(NOW)
  const oldest = today - USAGE_HISTORY_DAYS + 1
  await history.write({ usage: [cell('idle', oldest, 3), cell('idle', today, 1)], shadow: [], months: [] })
  clock = NOW + HOUR_MS // 00:30 the next day: `oldest` is no longer served
  t.equal(dayOf(clock), today + 1)
  await history.write({ usage: [cell('other', today + 1, 1)], shadow: [], months: [] })
  t.same(await history.usage('idle', oldest, oldest), none(oldest), 'the day that aged out is gone though the write touched another consumer')
  t.same(await history.usage('idle', today, today), [{ day: today, admitted: 1, units: 1, rejected: 0, overage: 0 }])
  clock = NOW + DAY_MS * USAGE_HISTORY_DAYS
  await history.write({ usage: [], shadow: [], months: [] })
  t.same(await history.usage('idle', today, today), none(today), 'an empty write an hour later prunes every consumer')
})
