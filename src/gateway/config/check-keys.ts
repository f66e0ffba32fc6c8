// The checks of keys.yaml's entries that span fields, entries and files: duplicate ids and digests,
// real expiry dates, the plan each key names (it must exist; a custom plan needs the key's own
// limits), limits that hold together (a shadow included), and one consumer's credentials agreeing on
// plan and limits.
import { checkShadow, limitsText, monthCoversDay, sameLimits, type ShadowEntry } from './limits.js'
import { ALL_SCOPES, type KeyRecord, type Limits, type Scope } from './types.js'

/** One entry of keys.yaml, as its schema allows it. */
export interface KeyEntry {
  id: string
  sha256: string
  consumer?: string
  plan: string
  /** The key's own limits: they replace its plan's, shadow included. */
  limits?: { perMinute: number, perDay: number, perMonth?: number, shadow?: ShadowEntry }
  disabled?: boolean
  expiresAt?: string
  scopes?: Scope[]
}

/** What plans.yaml says of one plan name: its limits, limits from each key, or a plan that is there but itself invalid. */
export type PlanState =
  | { readonly kind: 'fixed', readonly limits: Limits }
  | { readonly kind: 'custom', readonly overage: boolean }
  | { readonly kind: 'invalid' }

/** Collects problems (the loader's ProblemList). */
interface Problems { add: (problem: string) => void }

/** Unix ms of an RFC 3339 timestamp or a date alone (00:00 UTC); NaN for a day the calendar lacks (Date.parse would roll 02-31 over). */
export function toMillis (date: string): number {
  const [year = NaN, month = NaN, day = NaN] = date.slice(0, 10).split('-').map(Number)
  const calendar = new Date(Date.UTC(year, month - 1, day))
  if (calendar.getUTCMonth() !== month - 1 || calendar.getUTCDate() !== day) return NaN
  return Date.parse(date.length === 10 ? `${date}T00:00:00Z` : date)
}

/**
 * Every check of keys.yaml's entries; the records of the entries that pass, in file order.
 * Duplicates, dates and consumers are checked whatever state plans.yaml is in; what needs the plans
 * (unknown plan, custom plan without limits, the limits one consumer's credentials must share)
 * whenever plans.yaml names its plans (`plans` defined), even if some of them are invalid.
 */
export function checkKeys (entries: readonly KeyEntry[], plans: ReadonlyMap<string, PlanState> | undefined, problems: Problems): Array<[string, KeyRecord]> {
  const keys: Array<[string, KeyRecord]> = []
  const idAt = new Map<string, number>()
  const digestOwner = new Map<string, string>()
  /** consumer id → its first credential: index, id, plan and limits (resolved, or as written when the plan is unknown). */
  const consumers = new Map<string, { index: number, id: string, plan: string, limits: Limits | undefined }>()
  entries.forEach((key, i) => {
    const at = `keys.yaml: keys[${i}]`
    let ok = true
    if (idAt.has(key.id)) {
      problems.add(`${at}.id: duplicate id "${key.id}"`)
      ok = false
    } else {
      idAt.set(key.id, i)
    }
    const sameDigest = digestOwner.get(key.sha256)
    if (sameDigest !== undefined) {
      problems.add(`${at}.sha256: same digest as key "${sameDigest}"`)
      ok = false
    } else {
      digestOwner.set(key.sha256, key.id)
    }
    let limits: Limits | undefined
    if (key.limits !== undefined) {
      // A key's own month quota takes its plan's overage rule (overage: allow on the custom plan).
      const plan = plans?.get(key.plan)
      const overage = plan?.kind === 'custom' ? plan.overage : plan?.kind === 'fixed' ? plan.limits.overage === true : false
      const enforced: Limits = { perMinute: key.limits.perMinute, perDay: key.limits.perDay, ...(key.limits.perMonth === undefined ? {} : { perMonth: key.limits.perMonth, overage }) }
      limits = enforced
      if (enforced.perDay < enforced.perMinute) {
        problems.add(`${at}.limits: perDay (${enforced.perDay}) must be at least perMinute (${enforced.perMinute}): a day holds every minute's requests`)
        ok = false
      } else if (!monthCoversDay(`${at}.limits`, enforced, problems)) {
        ok = false
      } else if (key.limits.shadow !== undefined) {
        const shadow = checkShadow(`${at}.limits.shadow`, key.limits.shadow, enforced, problems)
        if (shadow === undefined) ok = false
        else limits = { ...enforced, shadow }
      }
    }
    if (plans !== undefined) {
      const plan = plans.get(key.plan)
      if (plan === undefined) {
        problems.add(`${at}.plan: unknown plan "${key.plan}"`)
        ok = false
      } else if (plan.kind === 'invalid') {
        ok = false // the plan's own problem is reported already
      } else {
        limits ??= plan.kind === 'fixed' ? plan.limits : undefined
        if (limits === undefined) {
          problems.add(`${at}: plan "${key.plan}" is custom, so the key needs limits: { perMinute, perDay }`)
          ok = false
        }
      }
    }
    let expiresAt: number | undefined
    if (key.expiresAt !== undefined) {
      expiresAt = toMillis(key.expiresAt)
      if (Number.isNaN(expiresAt)) {
        problems.add(`${at}.expiresAt: "${key.expiresAt}" is not a real date`)
        ok = false
      }
    }
    const consumerId = key.consumer ?? key.id
    const first = consumers.get(consumerId)
    if (idAt.get(key.id) !== i) {
      // a repeated id is reported above; comparing it as its own consumer would only repeat that
    } else if (first === undefined) {
      consumers.set(consumerId, { index: i, id: key.id, plan: key.plan, limits })
    } else if (first.plan !== key.plan || !sameLimits(first.limits, limits)) {
      const mine = limits === undefined ? '' : ` (${limitsText(limits)})`
      const theirs = first.limits === undefined ? '' : ` (${limitsText(first.limits)})`
      problems.add(`${at}: consumer "${consumerId}" has plan "${key.plan}"${mine} here but ` +
        `plan "${first.plan}"${theirs} in keys[${first.index}] ("${first.id}"): ` +
        'credentials of one consumer must agree on plan and limits')
      ok = false
    }
    if (!ok || limits === undefined) return
    keys.push([key.sha256, {
      id: key.id,
      consumerId,
      plan: key.plan,
      limits: { ...limits },
      disabled: key.disabled === true,
      expiresAt,
      expiresHeader: expiresAt === undefined ? undefined : new Date(expiresAt).toUTCString(),
      scopes: key.scopes === undefined ? ALL_SCOPES : ALL_SCOPES.filter((s) => key.scopes?.includes(s))
    }])
  })
  return keys
}
