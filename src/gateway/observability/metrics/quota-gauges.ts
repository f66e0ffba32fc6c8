// gateway_quota_consumers_near_limit{plan}: how many consumers are close to their monthly quota,
// for the alert of deploy/prometheus/alerts.yml. Read at scrape time from the usage history's quota
// watch (history/quota-watch.ts: consumers this process decided in the last hour whose units this
// month were at or over 90 % of their perMonth at the latest count) — no consumer id as a label, no
// work on the request path. Kept apart from the per-request metrics in registry.ts.
import { Gauge, type Registry } from 'prom-client'

/** Per plan, the consumers near their limit now; undefined while there is no history (the gauge reads 0). */
export type NearLimitSource = () => ReadonlyMap<string, number> | undefined

/** `plans`: the plans with a label from the first scrape (at 0); a plan seen later keeps its label, at 0 once it has none near. */
export function registerQuotaGauges (registry: Registry, plans: Iterable<string>, nearLimit: NearLimitSource): void {
  const labelled = new Set(plans)
  new Gauge<'plan'>({
    name: 'gateway_quota_consumers_near_limit',
    help: 'Consumers this process decided in the last hour whose units this calendar month were at or over 90 % of their perMonth ' +
      'at the latest count (the usage history\'s, flushed every few seconds), by plan; several processes may count the same consumer',
    labelNames: ['plan'],
    registers: [registry],
    collect () {
      const counts = nearLimit()
      for (const plan of counts?.keys() ?? []) labelled.add(plan)
      for (const plan of labelled) this.set({ plan }, counts?.get(plan) ?? 0)
    }
  })
}
