// `plans diff DIR`: what a changed config directory would change in the limits of the running
// gateway, before it is shipped — per plan, the limits in force and the new ones (shadow included)
// and how many consumers DIR configures on that plan; per consumer of a custom plan (limits of its
// own), the same; and each route whose cost (units a request spends, routes.yaml) changes. Limits
// include the month's quota and its overage rule. The running side is read through the admin API
// (`/admin/config`, and `/admin/consumers/:id` for custom plans), the new side is DIR loaded as the
// gateway would load it.
import { limitsText, sameLimits } from '../gateway/config/limits.js'
import type { ConfigSnapshot, KeyRecord, Limits } from '../gateway/config/types.js'
import { CommandError } from './errors.js'

/** What the admin API says of the config in force (the parts compared). */
export interface RunningConfig {
  version?: string
  plans?: Record<string, Limits | 'custom'>
  anonymous?: Limits
  /** `METHOD /path` → units, for the routes that do not cost 1 (absent from a gateway older than costs). */
  costs?: Record<string, number>
}

/** A consumer's limits on the running gateway; undefined when it does not know the consumer. */
export type RunningLimitsOf = (consumerId: string) => Promise<Limits | undefined>

function consumersByPlan (next: ConfigSnapshot): Map<string, Map<string, KeyRecord>> {
  const byPlan = new Map<string, Map<string, KeyRecord>>()
  for (const key of next.keysById.values()) {
    if (key.disabled) continue
    let consumers = byPlan.get(key.plan)
    if (consumers === undefined) {
      consumers = new Map()
      byPlan.set(key.plan, consumers)
    }
    if (!consumers.has(key.consumerId)) consumers.set(key.consumerId, key)
  }
  return byPlan
}

const consumersText = (n: number): string => `${n} consumer${n === 1 ? '' : 's'}`

async function customPlanLines (plan: string, consumers: ReadonlyMap<string, KeyRecord>, runningLimitsOf: RunningLimitsOf): Promise<string[]> {
  const lines: string[] = []
  for (const [consumerId, key] of consumers) {
    const running = await runningLimitsOf(consumerId)
    if (running === undefined) lines.push(`    ${consumerId}: new consumer, ${limitsText(key.limits)}`)
    else if (!sameLimits(running, key.limits)) lines.push(`    ${consumerId}: ${limitsText(running)} → ${limitsText(key.limits)}`)
  }
  const head = `  ${plan} (custom: limits per consumer): ${lines.length === 0 ? 'unchanged' : `${lines.length} of ${consumersText(consumers.size)} change`}`
  return [head, ...lines]
}

/** A line per route whose cost changes (every route not listed costs 1). */
function costLines (running: Record<string, number> | undefined, next: ConfigSnapshot): string[] {
  const after = new Map(next.routes.filter((r) => r.cost !== 1).map((r) => [`${r.method} ${r.path}`, r.cost]))
  if (running === undefined) {
    return after.size === 0 ? [] : [`  route costs: the running gateway does not say its own; the new config sets ${[...after].map(([route, cost]) => `${route} ${cost}`).join(', ')}`]
  }
  const lines: string[] = []
  for (const route of new Set([...Object.keys(running), ...after.keys()])) {
    const before = running[route] ?? 1
    const now = after.get(route) ?? 1
    if (before !== now) lines.push(`  route cost: ${route} ${before} → ${now} unit${now === 1 ? '' : 's'} per request`)
  }
  return lines
}

/** The lines `plans diff` prints, and whether anything changes. */
export async function plansDiff (running: RunningConfig, next: ConfigSnapshot, runningLimitsOf: RunningLimitsOf): Promise<{ lines: string[], changed: boolean }> {
  if (running.plans === undefined) throw new CommandError('the admin API did not say which plans are in force: is --admin the gateway\'s admin port?')
  const byPlan = consumersByPlan(next)
  const lines: string[] = []
  let changed = false
  const names = [...new Set([...Object.keys(running.plans), ...next.plans.keys()])]
  for (const plan of names) {
    const before = running.plans[plan]
    const consumers = byPlan.get(plan) ?? new Map<string, KeyRecord>()
    const count = `(${consumersText(consumers.size)} in the new config)`
    if (!next.plans.has(plan)) {
      changed = true
      lines.push(`  ${plan}: removed (was ${before === 'custom' || before === undefined ? 'custom' : limitsText(before)})`)
      continue
    }
    const after = next.plans.get(plan)
    if (after === undefined) {
      const custom = await customPlanLines(plan, consumers, runningLimitsOf)
      changed ||= before !== 'custom' || custom.length > 1
      if (before !== undefined && before !== 'custom') custom[0] = `  ${plan}: ${limitsText(before)} → custom (limits per consumer) ${count}`
      lines.push(...custom)
    } else if (before === undefined) {
      changed = true
      lines.push(`  ${plan}: new plan, ${limitsText(after)} ${count}`)
    } else if (before === 'custom') {
      changed = true
      lines.push(`  ${plan}: custom → ${limitsText(after)} ${count}`)
    } else if (sameLimits(before, after)) {
      lines.push(`  ${plan}: unchanged, ${limitsText(after)} ${count}`)
    } else {
      changed = true
      lines.push(`  ${plan}: ${limitsText(before)} → ${limitsText(after)} ${count}`)
    }
  }
  const anonymous = running.anonymous
  if (anonymous !== undefined && !sameLimits({ perMinute: anonymous.perMinute, perDay: anonymous.perDay }, { perMinute: next.anonymous.perMinute, perDay: next.anonymous.perDay })) {
    changed = true
    lines.push(`  anonymous (per client address): ${limitsText(anonymous)} → ${limitsText(next.anonymous)}`)
  }
  const costs = costLines(running.costs, next)
  changed ||= costs.length > 0
  lines.push(...costs)
  return { lines, changed }
}
