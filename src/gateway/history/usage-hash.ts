// The fields of a consumer's usage hash for one month (`rl:{consumer}:u:YYYYMM`, redis-history.ts),
// written and read in one place. Per day `DD` (01 … 31): `DDa` requests admitted, `DDr` rejected,
// `DDx` units beyond one per admitted request (only when a route costs more than 1, so a config
// without costs writes no more fields than before: units = DDa + DDx) and `DDo` units admitted past
// the month's quota under overage: allow (only when there are some). For the month: `u`, the units
// admitted while the consumer's limits had a month quota — what the quota watch reads back from the
// HINCRBY's reply (quota-watch.ts); the month's totals shown to ops are summed from the days instead,
// so they count every unit of the month whatever its limits were. At most 4 × 31 + 1 fields.
import { NO_USAGE, type UsageCounts } from './store.js'
import { usageCell, type UsageCell } from './tally.js'

export const MONTH_UNITS_FIELD = 'u'

/** `7` → `07`: a day of the month as its fields begin. */
export function dayField (dayOfMonth: number): string {
  return String(dayOfMonth).padStart(2, '0')
}

/**
 * The HINCRBYs a usage cell makes (the counts that are not 0), each with the cell to send again
 * should that one command fail (made only then): it holds that command's count alone, so a retry
 * never adds another count twice.
 */
export function usageFields (cell: UsageCell, dayOfMonth: number): Array<{ field: string, n: number, alone: () => UsageCell }> {
  const dd = dayField(dayOfMonth)
  const only = (counts: Partial<UsageCell>) => (): UsageCell => ({ ...usageCell(cell.consumerId, cell.day), ...counts })
  const fields = []
  if (cell.admitted > 0) fields.push({ field: `${dd}a`, n: cell.admitted, alone: only({ admitted: cell.admitted, units: cell.admitted }) })
  const extra = cell.units - cell.admitted
  if (extra > 0) fields.push({ field: `${dd}x`, n: extra, alone: only({ units: extra }) })
  if (cell.rejected > 0) fields.push({ field: `${dd}r`, n: cell.rejected, alone: only({ rejected: cell.rejected }) })
  if (cell.overage > 0) fields.push({ field: `${dd}o`, n: cell.overage, alone: only({ overage: cell.overage }) })
  return fields
}

/** A day's counts in a month's usage hash (the fields of day `dd`). */
export function dayCounts (hash: Record<string, string> | undefined, dd: string): UsageCounts {
  if (hash === undefined) return NO_USAGE
  const admitted = Number(hash[`${dd}a`] ?? 0)
  return { admitted, units: admitted + Number(hash[`${dd}x`] ?? 0), rejected: Number(hash[`${dd}r`] ?? 0), overage: Number(hash[`${dd}o`] ?? 0) }
}

/** Units and overage units of every day a month's usage hash holds. */
export function monthTotals (hash: Record<string, string>): { units: number, overage: number } {
  let units = 0
  let overage = 0
  for (const [field, value] of Object.entries(hash)) {
    const kind = field.length === 3 ? field[2] : ''
    if (kind === 'a' || kind === 'x') units += Number(value)
    else if (kind === 'o') overage += Number(value)
  }
  return { units, overage }
}
