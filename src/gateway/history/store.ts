// The history store contract: where the usage history (per consumer and UTC day) and the shadow
// records (per plan, consumer and UTC hour) live once a flush has written them. Redis when the
// limiter is on Redis (redis-history.ts: every gateway process adds to the same counts, any one
// answers for all), else this process's memory (memory-history.ts: per process, and the admin API
// says so).
import type { Batch } from './tally.js'

/** Days of usage history served (so a month and its edges fit); older days are refused by the API and dropped by the stores. */
export const USAGE_HISTORY_DAYS = 35
/** Hours of shadow records served: the last 24 h, the oldest hour counted whole (so 24 to 25 h). */
export const SHADOW_WINDOW_HOURS = 24

/** `shared`: one history for every gateway on the same Redis; `process`: this process's own, since it started. */
export type HistoryScope = 'shared' | 'process'

export interface UsageDay {
  readonly day: number
  readonly admitted: number
  readonly rejected: number
}

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

/** Two counts of one consumer's shadow rejections as one. */
export function sumShadow (a: ShadowCounts, b: ShadowCounts): ShadowCounts {
  return { rejections: a.rejections + b.rejections, admitted: a.admitted + b.admitted, first: Math.min(a.first, b.first), last: Math.max(a.last, b.last) }
}

export interface HistoryStore {
  readonly scope: HistoryScope
  /** Adds a batch's counts. Answers what it could not write (to send with the next flush); an empty batch when all was written. */
  write: (batch: Batch) => Promise<Batch>
  /** The consumer's counts for each day from `fromDay` to `toDay`, in order; 0 for a day without any. */
  usage: (consumerId: string, fromDay: number, toDay: number) => Promise<UsageDay[]>
  /** Every consumer with shadow rejections under `plan` in the hours `fromHour` … `toHour`, summed over them, any order. */
  shadow: (plan: string, fromHour: number, toHour: number) => Promise<ShadowRecord[]>
  close: () => Promise<void>
}

/** Each day from `fromDay` to `toDay`, with the counts `get` has for it (0 and 0 for a day it does not know). */
export function daysFrom (fromDay: number, toDay: number, get: (day: number) => { admitted: number, rejected: number } | undefined): UsageDay[] {
  const days: UsageDay[] = []
  for (let day = fromDay; day <= toDay; day++) {
    const counts = get(day)
    days.push({ day, admitted: counts?.admitted ?? 0, rejected: counts?.rejected ?? 0 })
  }
  return days
}
