// The ledger: what this process admitted for one id per bucket still in a window (minute, day, month), so a shard
// that lost its data can be re-seeded with it. Invariant: every admission is recorded in the buckets it was counted
// (or written back) in, and a bucket leaves only once it is out of every window by the earliest Redis time. The month
// table is made at the first month recorded: an id without a month limit never holds one.
import { calendarMonth, DAY_BUCKET_MS, DAY_WINDOW, MINUTE_BUCKET_MS, MINUTE_WINDOW } from '../arithmetic.js'
import type { Adjustment } from './scripts.js'

export class Ledger {
  readonly #minute = new Map<number, number>()
  readonly #day = new Map<number, number>()
  #month: Map<number, number> | undefined = undefined

  /** Nothing is recorded in a day or month window (the id can be forgotten once idle). */
  get longWindowsEmpty (): boolean { return this.#day.size + (this.#month?.size ?? 0) === 0 }

  /** Records an admission of `cost` units in its buckets (`month` 0: no month limit). */
  record (minute: number, day: number, month: number, cost: number): void {
    this.#minute.set(minute, (this.#minute.get(minute) ?? 0) + cost)
    this.#day.set(day, (this.#day.get(day) ?? 0) + cost)
    if (month > 0) {
      const months = this.#month ??= new Map<number, number>()
      months.set(month, (months.get(month) ?? 0) + cost)
    }
  }

  /** Drops what left every window by Redis time `redisTime` at the earliest (the sweep's, once a second). */
  prune (redisTime: number): void {
    for (const bucket of this.#minute.keys()) if (bucket <= Math.floor(redisTime / MINUTE_BUCKET_MS) - MINUTE_WINDOW.slots) this.#minute.delete(bucket)
    for (const bucket of this.#day.keys()) if (bucket <= Math.floor(redisTime / DAY_BUCKET_MS) - DAY_WINDOW.slots) this.#day.delete(bucket)
    const months = this.#month
    if (months !== undefined && months.size > 0) for (const month of months.keys()) if (month < calendarMonth(redisTime).index) months.delete(month)
  }

  /** The ledger as adjustments: each window's buckets on their own. */
  adjustments (): Adjustment[] {
    return [...[...this.#minute].map(([bucket, delta]) => ({ minute: bucket, day: 0, month: 0, delta })),
      ...[...this.#day].map(([bucket, delta]) => ({ minute: 0, day: bucket, month: 0, delta })),
      ...[...(this.#month ?? [])].map(([bucket, delta]) => ({ minute: 0, day: 0, month: bucket, delta }))]
  }
}
