// Adjustments owed to Redis (give-backs, write-backs, re-seeds) as lists a process keeps until a call carries them:
// one entry per set of buckets, merged on the way in, and what a list comes to.
import type { Adjustment } from './scripts.js'

/** `list` with `adj` added (merged with an entry of the same buckets), entries at 0 or below dropped. */
export function addAdjustment (list: readonly Adjustment[], adj: Adjustment): Adjustment[] {
  const same = (entry: Adjustment): boolean => entry.minute === adj.minute && entry.day === adj.day && entry.month === adj.month
  const merged = list.some(same) ? list.map((entry) => same(entry) ? { ...entry, delta: entry.delta + adj.delta } : entry) : [...list, adj]
  return merged.filter((entry) => entry.delta > 0)
}

/** `list` less what a call carried (`sent`), once Redis counted it. */
export function settleAdjustments (list: readonly Adjustment[], sent: readonly Adjustment[]): Adjustment[] {
  return sent.reduce((rest, adjustment) => addAdjustment(rest, { ...adjustment, delta: -adjustment.delta }), list.slice())
}

/** The units a list of adjustments comes to (read at every decision: an empty list, the usual one, skips the reduce). */
export function adjustmentUnits (list: readonly Adjustment[]): number {
  return list.length === 0 ? 0 : list.reduce((sum, adjustment) => sum + adjustment.delta, 0)
}

/** What a part that owes nothing holds or hands a call: one frozen empty list, shared, never a new one per account or call. */
export const NO_ADJUSTMENTS: readonly Adjustment[] = Object.freeze([])
