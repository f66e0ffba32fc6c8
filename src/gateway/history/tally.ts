// What the limiter tells the history in the request, counted in this process's memory only: per
// consumer and UTC day, requests admitted and rejected; per plan, consumer and UTC hour, the shadow
// rejections, how many of them the enforced limits admitted, and the first and last one. A decision
// costs a Map lookup and an increment (two for a shadow rejection); the history plugin drains the
// tally every few seconds into one write to the history store (plugin.ts), never on the hot path.
import type { KeyRecord } from '../config/types.js'
import type { DecisionRecorder, RateLimitDecision } from '../limiter/decision.js'
import { dayOf, hourOf } from './days.js'
import { sumShadow } from './store.js'

export interface UsageCell {
  readonly consumerId: string
  readonly day: number
  admitted: number
  rejected: number
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
}

export const EMPTY_BATCH: Batch = Object.freeze({ usage: [], shadow: [] })

export function isEmpty (batch: Batch): boolean {
  return batch.usage.length === 0 && batch.shadow.length === 0
}

/** Counts decisions until drained. */
export class DecisionTally implements DecisionRecorder {
  /** Consumer → its cell for the day of its latest decision; a cell of another day is set aside in `earlier`. */
  private usage = new Map<string, UsageCell>()
  private earlier: UsageCell[] = []
  /** Plan → consumer → its shadow cell for the hour of its latest shadow rejection. */
  private shadow = new Map<string, Map<string, ShadowCell>>()
  private earlierShadow: ShadowCell[] = []

  readonly note = (consumer: KeyRecord, decision: RateLimitDecision): void => {
    const day = dayOf(decision.now)
    let cell = this.usage.get(consumer.consumerId)
    if (cell === undefined || cell.day !== day) {
      if (cell !== undefined) this.earlier.push(cell)
      cell = { consumerId: consumer.consumerId, day, admitted: 0, rejected: 0 }
      this.usage.set(consumer.consumerId, cell)
    }
    if (decision.allowed) cell.admitted++
    else cell.rejected++
    if (decision.shadowRejectedBy !== undefined) this.noteShadow(consumer, decision)
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
    this.usage = new Map()
    this.earlier = []
    this.shadow = new Map()
    this.earlierShadow = []
    return { usage, shadow }
  }
}

/**
 * One batch holding every count of `batches`, a cell per consumer and day (per plan, consumer and
 * hour), without the cells `keep` refuses (too old to be served any more).
 */
export function mergeBatches (batches: readonly Batch[], keep: { day: (day: number) => boolean, hour: (hour: number) => boolean }): Batch {
  const usage = new Map<string, UsageCell>()
  const shadow = new Map<string, ShadowCell>()
  for (const batch of batches) {
    for (const cell of batch.usage) {
      if (!keep.day(cell.day)) continue
      const id = `${cell.consumerId}\n${cell.day}`
      const into = usage.get(id)
      if (into === undefined) usage.set(id, { ...cell })
      else {
        into.admitted += cell.admitted
        into.rejected += cell.rejected
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
  return { usage: [...usage.values()], shadow: [...shadow.values()] }
}
