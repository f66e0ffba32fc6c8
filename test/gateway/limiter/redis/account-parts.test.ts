// The parts of a process's account on the Redis path keep their own invariants, whatever their callers do: a pool is
// never spent past what is left nor once lapsed, and what is left of it is given back once; a reserve is never spent
// past its cap while a call that may lower it is in flight, nor once Redis may have dropped it; an allowance never
// past its units; write-backs leave only once counted; a data loss leaves nothing to spend. Each check drives the
// real class with a real shard clock whose bounds are pinned (a reply sent and read at the same local instant).
import t from 'tap'
import { calendarMonth, DAY_BUCKET_MS, MINUTE_BUCKET_MS, MINUTE_WINDOW } from '../../../../src/gateway/limiter/arithmetic.js'
import { AllowanceSpent, ALLOWANCE_WINDOW_MS } from '../../../../src/gateway/limiter/redis/allowance.js'
import { createShardClock, type ShardClock } from '../../../../src/gateway/limiter/redis/clock.js'
import { RESERVE_TTL_MS } from '../../../../src/gateway/limiter/redis/layout.js'
import { Ledger } from '../../../../src/gateway/limiter/redis/ledger.js'
import { Pool, SPEND_MARGIN_MS } from '../../../../src/gateway/limiter/redis/pool.js'
import { Reserve, RESERVE_COVER_MS } from '../../../../src/gateway/limiter/redis/reserve.js'
import type { Adjustment } from '../../../../src/gateway/limiter/redis/scripts.js'

/** Redis time is local time + OFFSET exactly (at the instant learnt; the drift bound widens it after). */
const OFFSET = 5_000
const REDIS_START = 1_900_000_000_000 // a second's start
const clockAt = (localNow: number): ShardClock => {
  const clock = createShardClock()
  clock.learn(localNow + OFFSET, localNow, localNow)
  return clock
}
const admission = (delta: number): Adjustment => ({ minute: REDIS_START / MINUTE_BUCKET_MS, day: 0, month: 0, delta })

t.test('a pool is spent only while live and never past what is left', async (t) => {
  const local = REDIS_START - OFFSET
  const clock = clockAt(local)
  const pool = new Pool()
  t.notOk(pool.spend(1, clock, local), 'an empty pool spends nothing')
  pool.fill(5, 3, REDIS_START + 100, false)
  t.equal(pool.granted, 3, 'the block is held')
  t.notOk(pool.spend(6, clock, local + 100), 'more than is left: refused')
  t.equal(pool.units, 5, 'a refused spend takes nothing')
  t.ok(pool.spend(4, clock, local + 100), 'within what is left')
  t.ok(pool.spend(1, clock, local + 100), 'the last unit')
  t.notOk(pool.spend(1, clock, local + 100), 'spent out: refused')
  t.equal(pool.units, 0, 'never below 0')
  pool.fill(4, 0, REDIS_START + 200, false)
  // The bucket ends at REDIS_START + 1000; a spend needs the latest Redis time SPEND_MARGIN_MS inside it (the drift
  // bound adds 0.001 ms per local ms since the reply: 1 ms at 998 ms later).
  const lapse = local + MINUTE_BUCKET_MS - SPEND_MARGIN_MS
  t.ok(pool.live(clock, lapse - 2), 'live just before the margin')
  t.notOk(pool.live(clock, lapse), 'lapsed at the margin')
  t.notOk(pool.spend(1, clock, lapse), 'a lapsed pool is never spent')
  t.equal(pool.units, 4, 'nothing was taken')
  t.equal(pool.msUntilLapse(REDIS_START + 500), MINUTE_BUCKET_MS - SPEND_MARGIN_MS - 500, 'the lapse timer waits until the margin')
  const late = new Pool()
  late.fill(3, 0, REDIS_START + 900, false)
  t.ok(late.live(clock, local + 900), 'a block granted late in its second is live in it')
  t.notOk(late.live(clock, local + MINUTE_BUCKET_MS + 100), 'and lapses with that second, not the next')
})

t.test('what is left of a pool is given back once, and a new bucket gives back the old one first', async (t) => {
  const local = REDIS_START - OFFSET
  const clock = clockAt(local)
  const pool = new Pool()
  pool.fill(6, 6, REDIS_START + 10, false)
  t.ok(pool.spend(2, clock, local + 10))
  t.notOk(pool.expire(clock, local + 20), 'a live pool does not expire')
  t.notOk(pool.owesGiveBack, 'nothing to give back while live')
  pool.fill(3, 2, REDIS_START + MINUTE_BUCKET_MS + 10, false)
  t.same(pool.takeGiveBacks(), [{ minute: REDIS_START / MINUTE_BUCKET_MS, day: Math.floor(REDIS_START / (15 * 60_000)), month: 0, delta: -4 }], 'the old bucket\'s 4 left go back')
  t.same(pool.takeGiveBacks(), [], 'a give-back is handed to one call only')
  t.equal(pool.units, 3, 'the new bucket\'s units')
  t.equal(pool.granted, 2, 'the old block is no longer held')
  t.ok(pool.expire(clock, local + 3 * MINUTE_BUCKET_MS), 'lapsed: expired')
  t.equal(pool.units, 0, 'nothing left to spend')
  t.equal(pool.granted, 0, 'no block held once given back')
  t.same(pool.takeGiveBacks().map((giveBack) => giveBack.delta), [-3], 'its rest given back')
  t.ok(pool.expire(clock, local + 3 * MINUTE_BUCKET_MS), 'an empty pool expires again')
  t.notOk(pool.owesGiveBack, 'without a second give-back')
})

t.test('a pool lost with the shard\'s data is neither spent nor given back', async (t) => {
  const local = REDIS_START - OFFSET
  const clock = clockAt(local)
  const pool = new Pool()
  pool.fill(5, 0, REDIS_START + 10, false)
  pool.fill(5, 0, REDIS_START + MINUTE_BUCKET_MS + 10, false) // a give-back of 5 owed
  pool.lose()
  t.notOk(pool.spend(1, clock, local + MINUTE_BUCKET_MS + 20), 'nothing spent after the loss')
  t.notOk(pool.owesGiveBack, 'no give-back: Redis no longer counts it')
  t.ok(pool.armLapseTimer(), 'a lapse timer arms')
  t.notOk(pool.armLapseTimer(), 'once')
  pool.lapseTimerFired()
  t.ok(pool.armLapseTimer(), 'and again after it fired')
})

t.test('a reserve is spent within its cap while a call is in flight, and only while Redis keeps it', async (t) => {
  const reserve = new Reserve()
  const latest = REDIS_START
  t.notOk(reserve.spend(latest, admission(1)), 'none kept: nothing spent')
  reserve.kept(10, REDIS_START)
  t.ok(reserve.spend(latest, admission(4)), 'within the reserve')
  t.notOk(reserve.spend(latest, admission(7)), 'past the reserve: refused')
  t.equal(reserve.unwrittenUnits(), 4, 'a refused spend owes nothing')
  reserve.capInFlight(2) // the call carries the 4 owed and asks 2: at most 6 whether Redis runs it or not
  t.equal(reserve.left(), 2, 'the cap less what is owed')
  t.ok(reserve.spend(latest, admission(2)), 'up to the cap')
  t.notOk(reserve.spend(latest, admission(1)), 'past the cap in flight: refused, though the reserve has 4 more')
  reserve.callFailed()
  t.equal(reserve.units, 6, 'a failed call holds the reserve to its cap')
  t.notOk(reserve.spend(latest, admission(1)), 'still nothing past it')
  t.same(reserve.writeBacks().map((writeBack) => writeBack.delta), [6], 'every admission owed, merged by bucket')
  const sent = reserve.writeBacks()
  reserve.settle(sent)
  t.notOk(reserve.owesWriteBack, 'counted by Redis: no longer owed')
  reserve.kept(10, REDIS_START)
  const cover = REDIS_START + RESERVE_TTL_MS - RESERVE_COVER_MS
  t.ok(reserve.spend(cover, admission(1)), 'spent while Redis keeps it a minute window and a margin after')
  t.notOk(reserve.spend(cover + 1, admission(1)), 'not once Redis may drop it within the window')
  t.notOk(reserve.spend(REDIS_START + RESERVE_TTL_MS - MINUTE_WINDOW.windowMs, admission(1)), 'never when Redis would drop it before a minute window has passed')
})

t.test('a reserve lost with the shard\'s data is not spent until Redis confirms a new one', async (t) => {
  const reserve = new Reserve()
  reserve.kept(10, REDIS_START)
  t.ok(reserve.spend(REDIS_START, admission(3)))
  t.equal(reserve.lose(), 7, 'what was left is asked for again')
  t.notOk(reserve.owesWriteBack, 'the write-backs are dropped (the ledger re-seeds them)')
  t.equal(reserve.left(), 0, 'nothing left')
  t.notOk(reserve.spend(REDIS_START, admission(1)), 'nothing spent before Redis confirms')
  reserve.kept(7, REDIS_START + 500)
  t.ok(reserve.spend(REDIS_START + 500, admission(7)), 'the confirmed reserve is spent')
})

t.test('the allowance spent stays within its units per window and in what is owed at once', async (t) => {
  const allowance = new AllowanceSpent()
  const local = 1_000
  t.ok(allowance.spend(local, 5, admission(3)))
  t.notOk(allowance.spend(local, 5, admission(3)), 'past the units: refused')
  t.ok(allowance.spend(local, 5, admission(2)), 'up to the units')
  t.equal(allowance.left(local + ALLOWANCE_WINDOW_MS - 1, 5), 0, 'within the window: none left')
  t.equal(allowance.left(local + ALLOWANCE_WINDOW_MS, 5), 0, 'the window passed, but 5 are still owed uncounted')
  allowance.settle(allowance.writeBacks())
  t.equal(allowance.left(local + ALLOWANCE_WINDOW_MS, 5), 5, 'counted and out of the window: all of it again')
  t.ok(allowance.spend(local + ALLOWANCE_WINDOW_MS, 5, admission(1)))
  allowance.lose()
  t.notOk(allowance.owesWriteBack, 'a data loss drops what is owed')
})

t.test('the ledger keeps each admission in its buckets until every window is past it', async (t) => {
  const ledger = new Ledger()
  const minute = REDIS_START / MINUTE_BUCKET_MS
  const day = Math.floor(REDIS_START / (15 * 60_000))
  t.ok(ledger.longWindowsEmpty)
  ledger.record(minute, day, 0, 2)
  ledger.record(minute, day, 0, 3)
  t.same(ledger.adjustments(), [{ minute, day: 0, month: 0, delta: 5 }, { minute: 0, day, month: 0, delta: 5 }], 'per window, merged')
  ledger.prune(REDIS_START + 60 * MINUTE_BUCKET_MS)
  t.equal(ledger.adjustments().length, 2, 'the minute bucket is still in its 61-bucket ring')
  ledger.prune(REDIS_START + 61 * MINUTE_BUCKET_MS)
  t.same(ledger.adjustments(), [{ minute: 0, day, month: 0, delta: 5 }], 'the minute bucket left; the day one stays')
  t.notOk(ledger.longWindowsEmpty)
})

// The parts hand their lists to a call without a copy (the write-backs a call carries, a pool's give-backs): safe only
// while no part changes a list in place once handed out. Each check holds a list a call would carry, changes the part,
// and finds the list as it was.
t.test('a list a call carries is never changed by the part after it was handed out', async (t) => {
  const reserve = new Reserve()
  reserve.kept(10, REDIS_START)
  t.ok(reserve.spend(REDIS_START, admission(2)))
  const sent = reserve.writeBacks()
  t.ok(reserve.spend(REDIS_START, admission(3)), 'a spend while the call is out')
  t.same(sent.map((writeBack) => writeBack.delta), [2], 'the list the call carries still says 2')
  reserve.settle(sent)
  t.same(sent.map((writeBack) => writeBack.delta), [2], 'and still after it is settled')
  t.same(reserve.writeBacks().map((writeBack) => writeBack.delta), [3], 'only the spend after it is still owed')
  reserve.settle([])
  t.equal(reserve.unwrittenUnits(), 3, 'a call that carried nothing settles nothing')

  const allowance = new AllowanceSpent()
  t.ok(allowance.spend(1_000, 10, admission(1)))
  const sentAllowance = allowance.writeBacks()
  t.ok(allowance.spend(1_000, 10, admission(4)))
  t.same(sentAllowance.map((writeBack) => writeBack.delta), [1], 'an allowance list carried is not changed by a later spend')
  allowance.settle(sentAllowance)
  t.equal(allowance.unwrittenUnits(), 4, 'only what the call carried leaves')
  allowance.lose()
  t.equal(allowance.unwrittenUnits(), 0)
  t.ok(allowance.spend(70_000, 10, admission(2)), 'spent again after a loss')
  t.equal(allowance.unwrittenUnits(), 2, 'owed on a list of its own')

  const local = REDIS_START - OFFSET
  const clock = clockAt(local)
  const pool = new Pool()
  const none = pool.takeGiveBacks()
  t.same(none, [], 'nothing owed: an empty list')
  pool.fill(4, 0, REDIS_START + 10, false)
  t.ok(pool.expire(clock, local + 3 * MINUTE_BUCKET_MS), 'lapsed: its 4 go back')
  t.same(none, [], 'the empty list handed out earlier is still empty')
  t.same(pool.takeGiveBacks().map((giveBack) => giveBack.delta), [-4], 'the give-back goes to the next call')
})

t.test('the ledger\'s month buckets: kept, re-seeded and pruned by the calendar month', async (t) => {
  const ledger = new Ledger()
  const minute = REDIS_START / MINUTE_BUCKET_MS
  const day = Math.floor(REDIS_START / (15 * 60_000))
  const month = calendarMonth(REDIS_START).index
  ledger.record(minute, day, 0, 1)
  t.equal(ledger.adjustments().filter((adjustment) => adjustment.month > 0).length, 0, 'no month limit: no month bucket')
  ledger.record(minute, day, month, 2)
  ledger.record(minute, day, month, 3)
  t.same(ledger.adjustments().filter((adjustment) => adjustment.month > 0), [{ minute: 0, day: 0, month, delta: 5 }], 'the month\'s admissions, merged')
  ledger.prune(REDIS_START + 100 * DAY_BUCKET_MS) // every minute and day bucket out of its window, the month not over
  t.same(ledger.adjustments(), [{ minute: 0, day: 0, month, delta: 5 }], 'the month bucket outlives the day window')
  t.notOk(ledger.longWindowsEmpty, 'a month bucket keeps the id')
  ledger.prune(calendarMonth(REDIS_START).end + 1)
  t.same(ledger.adjustments(), [], 'gone once its month is over')
  t.ok(ledger.longWindowsEmpty, 'then the id can be forgotten')
})
