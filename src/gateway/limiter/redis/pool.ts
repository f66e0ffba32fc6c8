// The pool: units Redis counted for this process in one minute bucket (a second), spendable here without asking
// until that bucket ends by the shard's clock, then given back. Invariants, kept by this class alone:
// - units are spent only while the pool is live (`live`: some are left, and the latest Redis time the clock allows is
//   inside the bucket, SPEND_MARGIN_MS before its end), and never more than are left: the pool never goes below 0;
// - units join only as counted by a reply (`fill`); a reply of a new bucket first gives back what is left of the old;
// - what is left of a lapsed pool becomes a give-back once (`expire`), and a give-back is handed to one call once
//   (`takeGiveBacks`): twice could uncount a request that was admitted;
// - `granted` is the block units held in the pool's bucket (what the next call tells Redis it still holds), 0 once
//   given back;
// - after a data loss (`lose`) nothing left is spent and no give-back is sent: Redis no longer counts either.
import { calendarMonth, DAY_BUCKET_MS, MINUTE_BUCKET_MS } from '../arithmetic.js'
import type { ShardClock } from './clock.js'
import { NO_ADJUSTMENTS } from './adjustments.js'
import type { Adjustment } from './scripts.js'

/** A grant is spent only this far inside its bucket (a TIME read in whole ms, timer granularity). */
export const SPEND_MARGIN_MS = 2

export class Pool {
  #units = 0
  #granted = 0
  #bucket = -1
  #dayBucket = 0
  #month = 0
  #giveBacks: Adjustment[] = []
  #lapseTimer = false

  /** Units left to spend (spendable only while `live`). */
  get units (): number { return this.#units }
  /** Block units granted in the pool's minute bucket and not given back. */
  get granted (): number { return this.#granted }
  /** The pool's buckets by Redis's clock: minute (a second), day (15 minutes), month (0: no month limit). */
  get bucket (): number { return this.#bucket }
  get dayBucket (): number { return this.#dayBucket }
  get month (): number { return this.#month }
  /** Give-backs waiting for a call. */
  get owesGiveBack (): boolean { return this.#giveBacks.length > 0 }

  /** True while the pool's bucket is not over by the latest Redis time at local `localNow`. */
  live (clock: ShardClock, localNow: number): boolean {
    const latest = clock.latest(localNow)
    return this.#units > 0 && latest !== undefined && latest < (this.#bucket + 1) * MINUTE_BUCKET_MS - SPEND_MARGIN_MS
  }

  /** Local ms until the pool can no longer be spent, by the latest Redis time `latest` (at least 1). */
  msUntilLapse (latest: number): number {
    return Math.max(1, (this.#bucket + 1) * MINUTE_BUCKET_MS - SPEND_MARGIN_MS - latest)
  }

  /** Spends `cost` if the pool is live and holds it; false (nothing spent) otherwise. */
  spend (cost: number, clock: ShardClock, localNow: number): boolean {
    if (cost > this.#units || !this.live(clock, localNow)) return false
    this.#units -= cost
    return true
  }

  /** A pool whose bucket is over becomes a give-back (it will never be spent); true if none is live. */
  expire (clock: ShardClock, localNow: number): boolean {
    if (this.live(clock, localNow)) return false
    this.giveBack()
    return true
  }

  /**
   * Units just counted at Redis time `redisNow` join the pool (an older pool is given back), `block` of them a block;
   * `monthly`: the consumer has a month limit (the month bucket is recorded).
   */
  fill (units: number, block: number, redisNow: number, monthly: boolean): void {
    const bucket = Math.floor(redisNow / MINUTE_BUCKET_MS)
    if (bucket !== this.#bucket) this.giveBack()
    this.#granted += block
    this.#bucket = bucket
    this.#dayBucket = Math.floor(redisNow / DAY_BUCKET_MS)
    this.#month = monthly ? calendarMonth(redisNow).index : 0
    this.#units += units
  }

  /** The give-backs for the call being built; they leave the pool. */
  takeGiveBacks (): readonly Adjustment[] {
    const giveBacks = this.#giveBacks
    if (giveBacks.length === 0) return NO_ADJUSTMENTS // none owed (most calls): no new list
    this.#giveBacks = [] // a give-back is sent once: twice could uncount a request that was admitted
    return giveBacks
  }

  /** The shard lost its data: what is left is never spent, and nothing is given back (Redis counts none of it). */
  lose (): void {
    this.#units = 0 // lost with the shard's data: never spent
    this.#giveBacks = []
  }

  /** Arms the timer that gives the pool back at its bucket's end; false if one is armed already. */
  armLapseTimer (): boolean {
    if (this.#lapseTimer) return false
    this.#lapseTimer = true
    return true
  }

  /** The lapse timer fired (a new one may be armed). */
  lapseTimerFired (): void {
    this.#lapseTimer = false
  }

  /** The pool goes back: what is left of it is given back, and no block of its bucket is held any more (the next call says so). */
  private giveBack (): void {
    if (this.#units > 0) this.#giveBacks.push({ minute: this.#bucket, day: this.#dayBucket, month: this.#month, delta: -this.#units })
    this.#units = 0
    this.#granted = 0
  }
}
