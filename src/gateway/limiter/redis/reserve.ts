// The reserve: units Redis keeps back for this process, spent here only while the shard does not answer, each
// admission owed to Redis as a write-back until a call counts it. Invariants, kept by this class alone:
// - spent only while Redis still keeps it long enough after the admission to cover a minute window: the latest Redis
//   time the clock allows is at most `until` − RESERVE_COVER_MS (`until`: the reply's Redis time + RESERVE_TTL_MS);
// - the write-backs owed never exceed the reserve, nor, while a call that may lower it is in flight or after one
//   failed, its cap (min(reserve, write-backs that call carries + what it asks)): applied or not, that call leaves
//   at least the cap kept back for what was spent;
// - a write-back leaves the list only once Redis counted it (`settle`); a failed call's are sent again;
// - after a data loss (`lose`) nothing is spent until Redis confirms a new reserve (cap 0).
// The list of write-backs is replaced, never changed in place: a call carries it as it is (no copy), and a reserve that
// owes nothing holds the one shared empty list (NO_ADJUSTMENTS).
import { adjustmentUnits, addAdjustment, NO_ADJUSTMENTS, settleAdjustments } from './adjustments.js'
import { RESERVE_TTL_MS } from './layout.js'
import type { Adjustment } from './scripts.js'

/** A reserve admission needs Redis to keep the reserve this long after it: the minute window and a margin. */
export const RESERVE_COVER_MS = 62_000

export class Reserve {
  #units = 0
  #until = 0
  #cap: number | undefined = undefined
  #writeBacks: readonly Adjustment[] = NO_ADJUSTMENTS

  /** Units Redis keeps back for this process, by the last reply. */
  get units (): number { return this.#units }
  /** Reserve admissions not yet counted in Redis. */
  get owesWriteBack (): boolean { return this.#writeBacks.length > 0 }

  unwrittenUnits (): number {
    return adjustmentUnits(this.#writeBacks)
  }

  /** What may still be spent (the cap while a call is in flight), less what is owed already. */
  left (): number {
    return Math.max(0, (this.#cap ?? this.#units) - this.unwrittenUnits())
  }

  /** Whether Redis keeps the reserve long enough after an admission at the latest Redis time `latest`. */
  covers (latest: number): boolean {
    return latest <= this.#until - RESERVE_COVER_MS
  }

  /** Spends `adjustment` (an admission at the latest Redis time `latest`) if the reserve covers it; false otherwise. */
  spend (latest: number, adjustment: Adjustment): boolean {
    if (!this.covers(latest)) return false
    if (this.unwrittenUnits() + adjustment.delta > (this.#cap ?? this.#units)) return false
    this.#writeBacks = addAdjustment(this.#writeBacks, adjustment)
    return true
  }

  /** A reply at Redis time `redisNow` said Redis keeps `units` back (until RESERVE_TTL_MS after it); the call is over. */
  kept (units: number, redisNow: number): void {
    this.#units = units
    this.#until = redisNow + RESERVE_TTL_MS
    this.#cap = undefined
  }

  /** A call carrying the write-backs owed now and asking `want` leaves: until it ends, only the cap may be spent. */
  capInFlight (want: number): void {
    this.#cap = Math.min(this.#units, this.unwrittenUnits() + want)
  }

  /** The write-backs owed now, for a call to carry (they stay owed until `settle`; the list is never changed in place). */
  writeBacks (): readonly Adjustment[] {
    return this.#writeBacks
  }

  /** Redis counted the write-backs a call carried. */
  settle (sent: readonly Adjustment[]): void {
    if (sent.length > 0) this.#writeBacks = settleAdjustments(this.#writeBacks, sent)
  }

  /** A call failed (whether Redis ran it is unknown): the reserve is held to the cap that holds either way. */
  callFailed (): void {
    this.#units = this.#cap ?? this.#units
    this.#cap = undefined
  }

  /** The shard lost its data: the write-backs owed are dropped, nothing is spent until a new reserve is confirmed; returns what was left to ask again. */
  lose (): number {
    const remaining = Math.max(0, this.#units - this.unwrittenUnits())
    this.#units = 0
    this.#cap = 0
    this.#writeBacks = NO_ADJUSTMENTS
    return remaining
  }
}
