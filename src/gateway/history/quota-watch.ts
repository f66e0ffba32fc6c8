// Which consumers are close to their monthly quota, for the gauge gateway_quota_consumers_near_limit
// {plan} and the alert on it: a small map in this process, consumer → its month's units over its
// quota at the latest count, fed by the history's flushes (each month cell written answers the
// consumer's units of the month so far, every process's on Redis: usage-hash.ts `u`), read at scrape
// time. Only consumers this process decided in the last hour count, in the current month (a quota
// renews at 00:00 UTC on the 1st); older entries are dropped when read. Only configured consumers
// with a month quota reach it, so it is bounded by the config. The decision itself does not carry the
// month's count unless the month binds, so the count comes from the history: up to one flush
// interval late, and from the history's counts (docs/operations.md, "Quotas").
import { dayOf, monthOf } from './days.js'
import type { MonthCell } from './tally.js'

/** A consumer is near its limit at this share of its perMonth. */
export const NEAR_LIMIT_SHARE = 0.9
/** …when this process decided it within this long. */
export const NEAR_LIMIT_RECENT_MS = 3_600_000

/** A consumer near its quota: its month's units at the latest count, against its quota. */
export interface NearLimit {
  readonly consumerId: string
  readonly plan: string
  /** `203001` */
  readonly month: string
  readonly units: number
  readonly quota: number
  /** Unix ms of its latest decision counted. */
  readonly last: number
}

export interface QuotaWatch {
  /** A month cell written, with the consumer's units of that month once it was added. */
  readonly note: (cell: MonthCell, units: number) => void
  /** The consumers decided in the last hour whose month is at or over NEAR_LIMIT_SHARE of their quota, most used first. */
  readonly nearLimit: (now: number) => NearLimit[]
}

/** Per plan, how many of `near` there are: what the gauge reads. */
export function countByPlan (near: readonly NearLimit[]): Map<string, number> {
  const byPlan = new Map<string, number>()
  for (const entry of near) byPlan.set(entry.plan, (byPlan.get(entry.plan) ?? 0) + 1)
  return byPlan
}

export function createQuotaWatch (): QuotaWatch {
  const entries = new Map<string, NearLimit>()
  return {
    note (cell, units) {
      const known = entries.get(cell.consumerId)
      // A retried cell of an older month (or an older decision) never replaces a newer count.
      if (known !== undefined && known.last > cell.last) return
      entries.set(cell.consumerId, { consumerId: cell.consumerId, plan: cell.plan, month: cell.month, units, quota: cell.quota, last: cell.last })
    },
    nearLimit (now) {
      const month = monthOf(dayOf(now)).month
      const near: NearLimit[] = []
      for (const [id, entry] of entries) {
        if (entry.last < now - NEAR_LIMIT_RECENT_MS) entries.delete(id)
        else if (entry.month === month && entry.units >= NEAR_LIMIT_SHARE * entry.quota) near.push(entry)
      }
      return near.sort((a, b) => b.units / b.quota - a.units / a.quota || (a.consumerId < b.consumerId ? -1 : 1))
    }
  }
}
