// What this process spent of the outage allowance for one id: admissions made uncounted while the shard did not
// answer, owed to Redis as write-backs, and every one of the last ALLOWANCE_WINDOW_MS. Invariants, kept by this class
// alone: within any ALLOWANCE_WINDOW_MS of local time, and in what is owed at once, the units spent stay within the
// allowance's units (`spend` refuses past them); a write-back leaves the list only once Redis counted it (`settle`);
// after a data loss (`lose`) nothing is owed. The list of write-backs is replaced, never changed in place: a call
// carries it as it is (no copy), and an allowance that owes nothing holds the one shared empty list (NO_ADJUSTMENTS).
import { adjustmentUnits, addAdjustment, NO_ADJUSTMENTS, settleAdjustments } from './adjustments.js'
import type { Adjustment } from './scripts.js'

/** The allowance is counted per this much local time: a rolling minute of Redis's, with room for drift. */
export const ALLOWANCE_WINDOW_MS = 62_000

export class AllowanceSpent {
  #writeBacks: readonly Adjustment[] = NO_ADJUSTMENTS
  #spendings: Array<{ readonly at: number, readonly cost: number }> = []

  /** Allowance admissions not yet counted in Redis. */
  get owesWriteBack (): boolean { return this.#writeBacks.length > 0 }

  unwrittenUnits (): number {
    return adjustmentUnits(this.#writeBacks)
  }

  /** Of an allowance of `units` per rolling window and uncounted at once, what is left at local `localNow`. */
  left (localNow: number, units: number): number {
    this.#spendings = this.#spendings.filter((spending) => spending.at > localNow - ALLOWANCE_WINDOW_MS)
    const spent = this.#spendings.reduce((sum, spending) => sum + spending.cost, 0)
    return Math.max(0, units - Math.max(spent, this.unwrittenUnits()))
  }

  /** Spends `adjustment` at local `localNow` if an allowance of `units` has room for it; false otherwise. */
  spend (localNow: number, units: number, adjustment: Adjustment): boolean {
    if (this.left(localNow, units) < adjustment.delta) return false
    this.#writeBacks = addAdjustment(this.#writeBacks, adjustment)
    this.#spendings.push({ at: localNow, cost: adjustment.delta })
    return true
  }

  /** The write-backs owed now, for a call to carry (they stay owed until `settle`; the list is never changed in place). */
  writeBacks (): readonly Adjustment[] {
    return this.#writeBacks
  }

  /** Redis counted the write-backs a call carried. */
  settle (sent: readonly Adjustment[]): void {
    if (sent.length > 0) this.#writeBacks = settleAdjustments(this.#writeBacks, sent)
  }

  /** The shard lost its data: nothing is owed (the ledger re-seeds what was admitted). */
  lose (): void {
    this.#writeBacks = NO_ADJUSTMENTS
  }
}
