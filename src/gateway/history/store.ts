// The history store contract: where the usage history (per consumer and UTC day, with each month's
// totals) and the shadow records (per plan, consumer and UTC hour) live once a flush has written them. Redis when the
// limiter is on Redis (redis-history.ts: every gateway process adds to the same counts, any one
// answers for all), else this process's memory (memory-history.ts: per process, and the admin API
// says so).
import type { Batch, MonthCell } from './tally.js'

/** Days of usage history served (so a month and its edges fit); older days are refused by the API and dropped by the stores. */
export const USAGE_HISTORY_DAYS = 35
/** A month's usage lives this many days past the month's end (a hash's expiry in Redis): the days served, and a margin. */
export const USAGE_KEY_KEEP_DAYS = USAGE_HISTORY_DAYS + 5
/** Hours of shadow records served: the last 24 h, the oldest hour counted whole (so 24 to 25 h). */
export const SHADOW_WINDOW_HOURS = 24
/**
 * Consumers a plan's shadow records keep per UTC hour, the heaviest by rejections (and the most a
 * read lists): an hour with more drops its lightest, so what a record costs, and what a read of the
 * last 24 h reads, is bounded whatever the number of consumers (docs/decisions.md §15).
 */
export const SHADOW_KEEP_PER_HOUR = 1_000

/** `shared`: one history for every gateway on the same Redis; `process`: this process's own, since it started. */
export type HistoryScope = 'shared' | 'process'

export interface UsageCounts {
  /** Requests admitted. */
  readonly admitted: number
  /** Units they spent (each its route's cost). */
  readonly units: number
  readonly rejected: number
  /** Of `units`, those admitted past the month's quota (overage: allow). */
  readonly overage: number
}

export interface UsageDay extends UsageCounts {
  readonly day: number
}

/** A consumer's units and overage units over one whole calendar month (UTC), as far as the history keeps it. */
export interface UsageMonth {
  /** `203001` */
  readonly month: string
  readonly units: number
  readonly overage: number
}

export const NO_USAGE: UsageCounts = Object.freeze({ admitted: 0, units: 0, rejected: 0, overage: 0 })

/** One consumer's shadow rejections over some hours of one plan. */
export interface ShadowRecord {
  readonly consumerId: string
  readonly rejections: number
  /** Of those, the ones the enforced limits admitted. */
  readonly admitted: number
  /** Unix ms of the first and the last. */
  readonly first: number
  readonly last: number
}

export type ShadowCounts = Omit<ShadowRecord, 'consumerId'>

/** A plan's shadow rejections over some hours: the totals, and the consumers with the most. */
export interface ShadowSummary {
  /** Consumers with a shadow rejection in those hours; an estimate (±1 %) when `complete` is false. */
  readonly consumers: number
  /** Every shadow rejection in those hours. */
  readonly rejections: number
  /** False when an hour had more consumers than its records keep (SHADOW_KEEP_PER_HOUR) and dropped its lightest. */
  readonly complete: boolean
  /** Rejections counted in `rejections` whose consumer was dropped from its hour's records (0 when complete). */
  readonly untracked: number
  /** The consumers with the most rejections, most first (ties: by id), at most the `top` asked for. */
  readonly top: ShadowRecord[]
}

/** Two counts of one consumer's shadow rejections as one. */
export function sumShadow (a: ShadowCounts, b: ShadowCounts): ShadowCounts {
  return { rejections: a.rejections + b.rejections, admitted: a.admitted + b.admitted, first: Math.min(a.first, b.first), last: Math.max(a.last, b.last) }
}

export interface HistoryStore {
  readonly scope: HistoryScope
  /**
   * Adds a batch's counts. Answers what it could not write (to send with the next flush); an empty
   * batch when all was written. `onMonth` is told, for each month cell written, the consumer's units
   * of that month once it is added (every process's, on Redis): what the quota watch reads.
   */
  write: (batch: Batch, onMonth?: (cell: MonthCell, units: number) => void) => Promise<Batch>
  /** The consumer's counts for each day from `fromDay` to `toDay`, in order; 0 for a day without any. */
  usage: (consumerId: string, fromDay: number, toDay: number) => Promise<UsageDay[]>
  /** The consumer's totals of each month `YYYYMM` asked for, in order: every day of it the history still has. */
  months: (consumerId: string, months: readonly string[]) => Promise<UsageMonth[]>
  /**
   * `plan`'s shadow rejections in the hours `fromHour` … `toHour`: totals, and the `top` consumers
   * with the most, each summed over those hours. Reads at most SHADOW_KEEP_PER_HOUR consumers per hour.
   */
  shadow: (plan: string, fromHour: number, toHour: number, top: number) => Promise<ShadowSummary>
  close: () => Promise<void>
}

/** Each day from `fromDay` to `toDay`, with the counts `get` has for it (zeros for a day it does not know). */
export function daysFrom (fromDay: number, toDay: number, get: (day: number) => UsageCounts | undefined): UsageDay[] {
  const days: UsageDay[] = []
  for (let day = fromDay; day <= toDay; day++) {
    const { admitted, units, rejected, overage } = get(day) ?? NO_USAGE
    days.push({ day, admitted, units, rejected, overage })
  }
  return days
}
