// The history of a gateway on the in-process limiter store: the same counts as in Redis, kept in this
// process's memory, so per process (GATEWAY_WORKERS > 1 keeps one per worker) and gone with it — the
// admin API answers `scope: "process"`. Bounded like the Redis layout: a consumer keeps its last
// USAGE_HISTORY_DAYS days and its months' totals as long as Redis keeps a month's hash, a plan its
// last SHADOW_WINDOW_HOURS + 1 hours, older ones are dropped at each write; an hour's shadow records keep its heaviest SHADOW_KEEP_PER_HOUR consumers, dropping
// the lightest as Redis does (shadow-top.ts), so a read sums at most that many per hour; only
// configured consumers reach it.
import { dayOf, daysOfMonth, hourOf, monthOf } from './days.js'
import { lightest, sumHours, topOf } from './shadow-top.js'
import { daysFrom, SHADOW_KEEP_PER_HOUR, SHADOW_WINDOW_HOURS, sumShadow, USAGE_HISTORY_DAYS, USAGE_KEY_KEEP_DAYS, type HistoryStore, type ShadowCounts } from './store.js'
import { EMPTY_BATCH } from './tally.js'

interface DayCounts { admitted: number, units: number, rejected: number, overage: number }
/** A month's units and overage (every day of it), and the units counted under a month quota (Redis's `u`). */
interface MonthCounts { units: number, overage: number, quotaUnits: number }

export interface MemoryHistoryOptions {
  /** The gateway clock, Unix ms: what is old enough to drop. */
  now: () => number
  /** Consumers a plan's shadow records keep per hour (default SHADOW_KEEP_PER_HOUR). */
  keepPerHour?: number
}

/** One plan's shadow records of one hour. */
interface ShadowHour {
  /** The hour's heaviest consumers (at most `keep`). */
  readonly records: Map<string, ShadowCounts>
  rejections: number
  /** Rejections of the consumers dropped from `records`, and how many were dropped. */
  untracked: number
  dropped: number
}

/** The map under `key` in `outer`, made empty the first time. */
function inner<K, K2, V> (outer: Map<K, Map<K2, V>>, key: K): Map<K2, V> {
  let map = outer.get(key)
  if (map === undefined) {
    map = new Map()
    outer.set(key, map)
  }
  return map
}

export function createMemoryHistory (opts: MemoryHistoryOptions): HistoryStore {
  /** consumer → day → counts */
  const usage = new Map<string, Map<number, DayCounts>>()
  /** consumer → month (`YYYYMM`) → its totals */
  const months = new Map<string, Map<string, MonthCounts>>()
  /** plan → hour → its records */
  const shadow = new Map<string, Map<number, ShadowHour>>()
  /** plan → consumer → the latest hour it had a shadow rejection in (every one, dropped or not: the exact count of consumers) */
  const seen = new Map<string, Map<string, number>>()
  const keep = opts.keepPerHour ?? SHADOW_KEEP_PER_HOUR

  function hourOfPlan (plan: string, hour: number): ShadowHour {
    const hours = inner(shadow, plan)
    let records = hours.get(hour)
    if (records === undefined) {
      records = { records: new Map(), rejections: 0, untracked: 0, dropped: 0 }
      hours.set(hour, records)
    }
    return records
  }

  /** Drops the lightest consumers of an hour over `keep` (fewest rejections, then smallest id: as ZPOPMIN). */
  function trim (hour: ShadowHour): void {
    const over = hour.records.size - keep
    if (over <= 0) return
    for (const [id, n] of lightest([...hour.records].map(([id, c]) => [id, c.rejections]), over)) {
      hour.records.delete(id)
      hour.untracked += n
      hour.dropped++
    }
  }

  function monthOfConsumer (consumerId: string, month: string): MonthCounts {
    const byMonth = inner(months, consumerId)
    let counts = byMonth.get(month)
    if (counts === undefined) {
      counts = { units: 0, overage: 0, quotaUnits: 0 }
      byMonth.set(month, counts)
    }
    return counts
  }

  /**
   * Drops what fell out of the kept days, months and hours. Every cut-off is a function of the hour
   * of `now`, so a full pass runs only when that hour has moved since the last one; a write within
   * the same hour checks only the consumers and plans it touched (what was kept before still passes
   * the same cut-offs). A full pass over 10,000 consumers took 13–27 ms — the event loop held every
   * flush, every 5 s — for what an hour changes at most once.
   */
  let prunedHour = Number.NaN
  function prune (touched: { consumers: Iterable<string>, plans: Iterable<string> }): void {
    const at = opts.now()
    const today = dayOf(at)
    const firstDay = today - USAGE_HISTORY_DAYS + 1
    const firstHour = hourOf(at) - SHADOW_WINDOW_HOURS
    const full = hourOf(at) !== prunedHour
    prunedHour = hourOf(at)
    const consumers = full ? usage.keys() : touched.consumers
    for (const consumerId of consumers) {
      const days = usage.get(consumerId)
      if (days === undefined) continue
      for (const day of days.keys()) if (day < firstDay) days.delete(day)
      if (days.size === 0) usage.delete(consumerId)
    }
    for (const consumerId of full ? months.keys() : touched.consumers) {
      const byMonth = months.get(consumerId)
      if (byMonth === undefined) continue
      for (const month of byMonth.keys()) if (daysOfMonth(month).next + USAGE_KEY_KEEP_DAYS <= today) byMonth.delete(month)
      if (byMonth.size === 0) months.delete(consumerId)
    }
    for (const plan of full ? shadow.keys() : touched.plans) {
      const hours = shadow.get(plan)
      if (hours === undefined) continue
      for (const hour of hours.keys()) if (hour < firstHour) hours.delete(hour)
      if (hours.size === 0) shadow.delete(plan)
    }
    for (const plan of full ? seen.keys() : touched.plans) {
      const byConsumer = seen.get(plan)
      if (byConsumer === undefined) continue
      for (const [id, hour] of byConsumer) if (hour < firstHour) byConsumer.delete(id)
      if (byConsumer.size === 0) seen.delete(plan)
    }
  }

  return {
    scope: 'process',
    async write (batch, onMonth) {
      for (const cell of batch.usage) {
        const days = inner(usage, cell.consumerId)
        const counts = days.get(cell.day)
        if (counts === undefined) days.set(cell.day, { admitted: cell.admitted, units: cell.units, rejected: cell.rejected, overage: cell.overage })
        else {
          counts.admitted += cell.admitted
          counts.units += cell.units
          counts.rejected += cell.rejected
          counts.overage += cell.overage
        }
        const month = monthOfConsumer(cell.consumerId, monthOf(cell.day).month)
        month.units += cell.units
        month.overage += cell.overage
      }
      for (const cell of batch.months) {
        const month = monthOfConsumer(cell.consumerId, cell.month)
        month.quotaUnits += cell.units
        onMonth?.(cell, month.quotaUnits)
      }
      const touched = new Set<ShadowHour>()
      for (const cell of batch.shadow) {
        const hour = hourOfPlan(cell.plan, cell.hour)
        const counts = hour.records.get(cell.consumerId)
        const added = { rejections: cell.rejections, admitted: cell.admitted, first: cell.first, last: cell.last }
        hour.records.set(cell.consumerId, counts === undefined ? added : sumShadow(counts, added))
        hour.rejections += cell.rejections
        touched.add(hour)
        const consumers = inner(seen, cell.plan)
        consumers.set(cell.consumerId, Math.max(consumers.get(cell.consumerId) ?? cell.hour, cell.hour))
      }
      for (const hour of touched) trim(hour)
      prune({
        consumers: new Set([...batch.usage.map((c) => c.consumerId), ...batch.months.map((c) => c.consumerId)]),
        plans: new Set(batch.shadow.map((c) => c.plan))
      })
      return EMPTY_BATCH
    },
    async usage (consumerId, fromDay, toDay) {
      const days = usage.get(consumerId)
      return daysFrom(fromDay, toDay, (day) => days?.get(day))
    },
    async months (consumerId, wanted) {
      const byMonth = months.get(consumerId)
      return wanted.map((month) => ({ month, units: byMonth?.get(month)?.units ?? 0, overage: byMonth?.get(month)?.overage ?? 0 }))
    },
    async shadow (plan, fromHour, toHour, top) {
      const hours = [...shadow.get(plan) ?? []].filter(([hour]) => hour >= fromHour && hour <= toHour).map(([, records]) => records)
      const summed = sumHours(hours.map((h) => [...h.records].map(([id, c]) => [id, c.rejections] as const)))
      const heaviest = topOf(summed, Math.min(top, keep))
      let consumers = 0
      for (const hour of seen.get(plan)?.values() ?? []) if (hour >= fromHour && hour <= toHour) consumers++
      return {
        consumers: Math.max(consumers, summed.size),
        rejections: hours.reduce((sum, h) => sum + h.rejections, 0),
        complete: hours.every((h) => h.dropped === 0),
        untracked: hours.reduce((sum, h) => sum + h.untracked, 0),
        top: heaviest.map(([consumerId, rejections]) => {
          let d: Omit<ShadowCounts, 'rejections'> | undefined
          for (const h of hours) {
            const c = h.records.get(consumerId)
            if (c !== undefined) d = d === undefined ? c : { admitted: d.admitted + c.admitted, first: Math.min(d.first, c.first), last: Math.max(d.last, c.last) }
          }
          return { consumerId, rejections, admitted: d?.admitted ?? 0, first: d?.first ?? 0, last: d?.last ?? 0 }
        })
      }
    },
    async close () {
      usage.clear()
      months.clear()
      shadow.clear()
      seen.clear()
    }
  }
}
