// The history of a gateway on the in-process limiter store: the same counts as in Redis, kept in this
// process's memory, so per process (GATEWAY_WORKERS > 1 keeps one per worker) and gone with it — the
// admin API answers `scope: "process"`. Bounded like the Redis layout: a consumer keeps its last
// USAGE_HISTORY_DAYS days, a plan its last SHADOW_WINDOW_HOURS + 1 hours, older ones are dropped at
// each write; only configured consumers reach it.
import { dayOf, hourOf } from './days.js'
import { daysFrom, SHADOW_WINDOW_HOURS, sumShadow, USAGE_HISTORY_DAYS, type HistoryStore, type ShadowCounts } from './store.js'
import { EMPTY_BATCH } from './tally.js'

interface DayCounts { admitted: number, rejected: number }

export interface MemoryHistoryOptions {
  /** The gateway clock, Unix ms: what is old enough to drop. */
  now: () => number
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
  /** plan → hour → consumer → counts */
  const shadow = new Map<string, Map<number, Map<string, ShadowCounts>>>()

  function prune (): void {
    const firstDay = dayOf(opts.now()) - USAGE_HISTORY_DAYS + 1
    for (const [consumerId, days] of usage) {
      for (const day of days.keys()) if (day < firstDay) days.delete(day)
      if (days.size === 0) usage.delete(consumerId)
    }
    const firstHour = hourOf(opts.now()) - SHADOW_WINDOW_HOURS
    for (const [plan, hours] of shadow) {
      for (const hour of hours.keys()) if (hour < firstHour) hours.delete(hour)
      if (hours.size === 0) shadow.delete(plan)
    }
  }

  return {
    scope: 'process',
    async write (batch) {
      for (const cell of batch.usage) {
        const days = inner(usage, cell.consumerId)
        const counts = days.get(cell.day)
        if (counts === undefined) days.set(cell.day, { admitted: cell.admitted, rejected: cell.rejected })
        else {
          counts.admitted += cell.admitted
          counts.rejected += cell.rejected
        }
      }
      for (const cell of batch.shadow) {
        const consumers = inner(inner(shadow, cell.plan), cell.hour)
        const counts = consumers.get(cell.consumerId)
        const added = { rejections: cell.rejections, admitted: cell.admitted, first: cell.first, last: cell.last }
        consumers.set(cell.consumerId, counts === undefined ? added : sumShadow(counts, added))
      }
      prune()
      return EMPTY_BATCH
    },
    async usage (consumerId, fromDay, toDay) {
      const days = usage.get(consumerId)
      return daysFrom(fromDay, toDay, (day) => days?.get(day))
    },
    async shadow (plan, fromHour, toHour) {
      const merged = new Map<string, ShadowCounts>()
      for (const [hour, consumers] of shadow.get(plan) ?? []) {
        if (hour < fromHour || hour > toHour) continue
        for (const [consumerId, c] of consumers) {
          const m = merged.get(consumerId)
          merged.set(consumerId, m === undefined ? c : sumShadow(m, c))
        }
      }
      return [...merged].map(([consumerId, c]) => ({ consumerId, ...c }))
    },
    async close () {
      usage.clear()
      shadow.clear()
    }
  }
}
