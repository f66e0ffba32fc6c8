// What the limiter tells the history in the request, counted in this process's memory only: per
// consumer and UTC day, requests admitted and rejected, the units the admitted ones spent (their
// routes' cost) and, of those, the units past the month's quota (overage: allow); per consumer with
// a month quota and calendar month, the units admitted (what the quota watch reads, quota-watch.ts);
// per plan, consumer and UTC hour, the shadow rejections, how many of them the enforced limits
// admitted, and the first and last one. A decision costs a Map lookup and a few increments (one more
// lookup with a month quota or a shadow rejection); the history plugin drains the tally every few
// seconds into one write to the history store (plugin.ts), never on the hot path.
import type { KeyRecord } from '../config/types.js'
import type { DecisionRecorder, RateLimitDecision } from '../limiter/decision.js'
import { dayOf, hourOf, monthOf } from './days.js'
import { sumShadow } from './store.js'

export interface UsageCell {
  readonly consumerId: string
  readonly day: number
  admitted: number
  /** Units the admitted requests spent (each its route's cost): `admitted` when every cost is 1. */
  units: number
  rejected: number
  /** Of `units`, those admitted past the month's quota under `overage: allow` (billed as overage). */
  overage: number
}

/** A consumer's units admitted in one calendar month (UTC), counted while its limits have a month quota. */
export interface MonthCell {
  readonly consumerId: string
  /** `203001` */
  readonly month: string
  units: number
  /** The plan and the quota (perMonth) of its latest decision, and that decision's Unix ms. */
  plan: string
  quota: number
  last: number
}

export interface ShadowCell {
  readonly plan: string
  readonly consumerId: string
  readonly hour: number
  /** Requests the shadow limits would have rejected. */
  rejections: number
  /** Of those, the ones the enforced limits admitted: the 429s the change would add. */
  admitted: number
  /** Unix ms of the first and the last. */
  first: number
  last: number
}

/** What one flush writes. */
export interface Batch {
  readonly usage: readonly UsageCell[]
  readonly shadow: readonly ShadowCell[]
  readonly months: readonly MonthCell[]
}

export const EMPTY_BATCH: Batch = Object.freeze({ usage: [], shadow: [], months: [] })

export function isEmpty (batch: Batch): boolean {
  return batch.usage.length === 0 && batch.shadow.length === 0 && batch.months.length === 0
}

/** A usage cell with nothing counted yet. */
export function usageCell (consumerId: string, day: number): UsageCell {
  return { consumerId, day, admitted: 0, units: 0, rejected: 0, overage: 0 }
}

/** Counts decisions until drained. */
export class DecisionTally implements DecisionRecorder {
  /** Consumer → its cell for the day of its latest decision; a cell of another day is set aside in `earlier`. */
  private usage = new Map<string, UsageCell>()
  private earlier: UsageCell[] = []
  /** Plan → consumer → its shadow cell for the hour of its latest shadow rejection. */
  private shadow = new Map<string, Map<string, ShadowCell>>()
  private earlierShadow: ShadowCell[] = []
  /** Consumer → its month cell for the month of its latest admission under a month quota; another month's in `earlierMonths`. */
  private months = new Map<string, MonthCell>()
  private earlierMonths: MonthCell[] = []

  readonly note = (consumer: KeyRecord, decision: RateLimitDecision): void => {
    const day = dayOf(decision.now)
    let cell = this.usage.get(consumer.consumerId)
    if (cell === undefined || cell.day !== day) {
      if (cell !== undefined) this.earlier.push(cell)
      cell = usageCell(consumer.consumerId, day)
      this.usage.set(consumer.consumerId, cell)
    }
    if (decision.allowed) {
      cell.admitted++
      cell.units += decision.cost
      cell.overage += decision.overageUnits
      const quota = consumer.limits.perMonth
      if (quota !== undefined) this.noteMonth(consumer, decision, day, quota)
    } else {
      cell.rejected++
    }
    if (decision.shadowRejectedBy !== undefined) this.noteShadow(consumer, decision)
  }

  private noteMonth (consumer: KeyRecord, decision: RateLimitDecision, day: number, quota: number): void {
    let cell = this.months.get(consumer.consumerId)
    // The month changes only with the day: its name is worked out once per consumer and day, not per decision.
    if (cell === undefined || dayOf(cell.last) !== day) {
      const month = monthOf(day).month
      if (cell === undefined || cell.month !== month) {
        if (cell !== undefined) this.earlierMonths.push(cell)
        cell = { consumerId: consumer.consumerId, month, units: 0, plan: consumer.plan, quota, last: decision.now }
        this.months.set(consumer.consumerId, cell)
      }
    }
    cell.units += decision.cost
    cell.plan = consumer.plan
    cell.quota = quota
    if (decision.now > cell.last) cell.last = decision.now
  }

  private noteShadow (consumer: KeyRecord, decision: RateLimitDecision): void {
    const hour = hourOf(decision.now)
    let byConsumer = this.shadow.get(consumer.plan)
    if (byConsumer === undefined) {
      byConsumer = new Map()
      this.shadow.set(consumer.plan, byConsumer)
    }
    let cell = byConsumer.get(consumer.consumerId)
    if (cell === undefined || cell.hour !== hour) {
      if (cell !== undefined) this.earlierShadow.push(cell)
      cell = { plan: consumer.plan, consumerId: consumer.consumerId, hour, rejections: 0, admitted: 0, first: decision.now, last: decision.now }
      byConsumer.set(consumer.consumerId, cell)
    }
    cell.rejections++
    if (decision.allowed) cell.admitted++
    if (decision.now < cell.first) cell.first = decision.now
    if (decision.now > cell.last) cell.last = decision.now
  }

  /** Everything counted since the last drain; the tally starts empty again. */
  drain (): Batch {
    const usage = [...this.earlier, ...this.usage.values()]
    const shadow = [...this.earlierShadow]
    for (const byConsumer of this.shadow.values()) shadow.push(...byConsumer.values())
    const months = [...this.earlierMonths, ...this.months.values()]
    this.usage = new Map()
    this.earlier = []
    this.shadow = new Map()
    this.earlierShadow = []
    this.months = new Map()
    this.earlierMonths = []
    return { usage, shadow, months }
  }
}

/**
 * One batch holding every count of `batches`, a cell per consumer and day (per plan, consumer and
 * hour; per consumer and month), without the cells `keep` refuses (too old to be served any more).
 */
export function mergeBatches (batches: readonly Batch[], keep: { day: (day: number) => boolean, hour: (hour: number) => boolean, month?: (month: string) => boolean }): Batch {
  const usage = new Map<string, UsageCell>()
  const shadow = new Map<string, ShadowCell>()
  const months = new Map<string, MonthCell>()
  for (const batch of batches) {
    for (const cell of batch.usage) {
      if (!keep.day(cell.day)) continue
      const id = `${cell.consumerId}\n${cell.day}`
      const into = usage.get(id)
      if (into === undefined) usage.set(id, { ...cell })
      else {
        into.admitted += cell.admitted
        into.units += cell.units
        into.rejected += cell.rejected
        into.overage += cell.overage
      }
    }
    for (const cell of batch.months) {
      if (keep.month?.(cell.month) === false) continue
      const id = `${cell.consumerId}\n${cell.month}`
      const into = months.get(id)
      if (into === undefined) months.set(id, { ...cell })
      else {
        into.units += cell.units
        // The plan and quota of the latest decision.
        if (cell.last >= into.last) Object.assign(into, { plan: cell.plan, quota: cell.quota, last: cell.last })
      }
    }
    for (const cell of batch.shadow) {
      if (!keep.hour(cell.hour)) continue
      const id = `${cell.plan}\n${cell.consumerId}\n${cell.hour}`
      const into = shadow.get(id)
      if (into === undefined) shadow.set(id, { ...cell })
      else Object.assign(into, sumShadow(into, cell))
    }
  }
  return { usage: [...usage.values()], shadow: [...shadow.values()], months: [...months.values()] }
}
