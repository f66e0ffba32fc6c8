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
  announce?: boolean
}

/** Collects problems (the loader's ProblemList). */
interface Problems { add: (problem: string) => void }

export function sameShadow (a: ShadowLimits | undefined, b: ShadowLimits | undefined): boolean {
  if (a === undefined || b === undefined) return a === b
  return a.perMinute === b.perMinute && a.perDay === b.perDay && a.announce === b.announce
}

/** Same enforced limits and same shadow. */
export function sameLimits (a: Limits | undefined, b: Limits | undefined): boolean {
  if (a === undefined || b === undefined) return a === b
  return a.perMinute === b.perMinute && a.perDay === b.perDay && sameShadow(a.shadow, b.shadow)
}

/** `60/min, 30/min shadow, 1000/day` — the enforced limits and what is rehearsed beside them. */
export function limitsText (limits: Limits): string {
  const shadow = limits.shadow
  const minute = shadow?.perMinute === undefined ? '' : `, shadow ${shadow.perMinute}/min`
  const day = shadow?.perDay === undefined ? '' : `, shadow ${shadow.perDay}/day`
  return `${limits.perMinute}/min${minute}, ${limits.perDay}/day${day}${shadow?.announce === true ? ', announced' : ''}`
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
  if (entry.perMinute === undefined && entry.perDay === undefined) {
    problems.add(`${where}: needs perMinute or perDay (or both): the limits to rehearse`)
    return undefined
  }
  let ok = true
  for (const [field, value, limit] of [['perMinute', entry.perMinute, enforced.perMinute], ['perDay', entry.perDay, enforced.perDay]] as const) {
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
  return ok ? { perMinute: entry.perMinute, perDay: entry.perDay, announce: entry.announce === true } : undefined
}
