// What holds between limits, for the loader and everything that compares configs: equality (with
// the shadow limits being rehearsed), one way to print them, and the rules of a shadow — a
// rehearsal of a lower limit, so each of its windows must have an enforced one to be compared with
// and must be below it (equal rehearses nothing; above, the enforced limit rejects first and the
// shadow would never count a request).
import type { Limits, ShadowLimits } from './types.js'

/** `shadow:` as plans.yaml and keys.yaml may write it (shape and bounds already checked by the schema). */
export interface ShadowEntry {
  perMinute?: number
  perDay?: number
  perMonth?: number
  announce?: boolean
}

/** Collects problems (the loader's ProblemList). */
interface Problems { add: (problem: string) => void }

export function sameShadow (a: ShadowLimits | undefined, b: ShadowLimits | undefined): boolean {
  if (a === undefined || b === undefined) return a === b
  return a.perMinute === b.perMinute && a.perDay === b.perDay && a.perMonth === b.perMonth && a.announce === b.announce
}

/** Same enforced limits and same shadow. */
export function sameLimits (a: Limits | undefined, b: Limits | undefined): boolean {
  if (a === undefined || b === undefined) return a === b
  return a.perMinute === b.perMinute && a.perDay === b.perDay && a.perMonth === b.perMonth && (a.overage === true) === (b.overage === true) && sameShadow(a.shadow, b.shadow)
}

/** `60/min, 30/min shadow, 1000/day` — the enforced limits and what is rehearsed beside them. */
export function limitsText (limits: Limits): string {
  const shadow = limits.shadow
  const minute = shadow?.perMinute === undefined ? '' : `, shadow ${shadow.perMinute}/min`
  const day = shadow?.perDay === undefined ? '' : `, shadow ${shadow.perDay}/day`
  const month = limits.perMonth === undefined ? '' : `, ${limits.perMonth}/month${limits.overage === true ? ' (overage allowed)' : ''}`
  const shadowMonth = shadow?.perMonth === undefined ? '' : `, shadow ${shadow.perMonth}/month`
  return `${limits.perMinute}/min${minute}, ${limits.perDay}/day${day}${month}${shadowMonth}${shadow?.announce === true ? ', announced' : ''}`
}

/** `where`: perMonth (…) must be at least perDay (…), when it is not. */
export function monthCoversDay (where: string, limits: Limits, problems: Problems): boolean {
  if (limits.perMonth === undefined || limits.perMonth >= limits.perDay) return true
  problems.add(`${where}: perMonth (${limits.perMonth}) must be at least perDay (${limits.perDay}): a month holds every day's requests`)
  return false
}

/**
 * The shadow of `enforced` at `where` (`plans.yaml: plans.free.shadow`), or undefined after
 * reporting why it cannot be one. `enforced` undefined: there is nothing to rehearse against (a
 * custom plan, whose limits come from each key).
 */
export function checkShadow (where: string, entry: ShadowEntry, enforced: Limits | undefined, problems: Problems): ShadowLimits | undefined {
  if (enforced === undefined) {
    problems.add(`${where}: a custom plan has no limits of its own for a shadow to rehearse against: give each key's limits a shadow instead`)
    return undefined
  }
  if (entry.perMinute === undefined && entry.perDay === undefined && entry.perMonth === undefined) {
    problems.add(`${where}: needs perMinute, perDay or perMonth: the limits to rehearse`)
    return undefined
  }
  let ok = true
  // A shadow perMonth may rehearse a quota the plan does not have yet.
  for (const [field, value, limit] of [['perMinute', entry.perMinute, enforced.perMinute], ['perDay', entry.perDay, enforced.perDay], ['perMonth', entry.perMonth, enforced.perMonth ?? Infinity]] as const) {
    if (value === undefined || value < limit) continue
    ok = false
    problems.add(value === limit
      ? `${where}.${field}: ${value} equals the enforced ${field}: a shadow limit rehearses a different one (remove it, or give the new value)`
      : `${where}.${field}: ${value} is above the enforced ${field} (${limit}): the enforced limit rejects first, so this one would never count a request`)
  }
  const minute = entry.perMinute ?? enforced.perMinute
  const day = entry.perDay ?? enforced.perDay
  if (ok && day < minute) {
    ok = false
    problems.add(`${where}: perDay (${day}) must be at least perMinute (${minute}) once the shadow applies: a day holds every minute's requests`)
  }
  const month = entry.perMonth ?? enforced.perMonth
  if (ok && month !== undefined && month < day) {
    ok = false
    problems.add(`${where}: perMonth (${month}) must be at least perDay (${day}) once the shadow applies: a month holds every day's requests`)
  }
  return ok ? { perMinute: entry.perMinute, perDay: entry.perDay, ...(entry.perMonth === undefined ? {} : { perMonth: entry.perMonth }), announce: entry.announce === true } : undefined
}
