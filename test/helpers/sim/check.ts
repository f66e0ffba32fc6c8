// What every simulated schedule must show: no consumer got more units than its limit in any rolling
// minute, any rolling day, or any calendar month (UTC), counted from the instants its admissions
// were made — and, on schedules built for it, how far below the ideal the admissions fell.
import type { Admission } from './process.js'

export interface Limits { perMinute: number, perDay: number, perMonth: number }

export interface Violation {
  readonly consumer: string
  readonly window: 'minute' | 'day' | 'month'
  readonly limit: number
  readonly units: number
  /** Virtual instant the window ended at. */
  readonly at: number
}

/** The most units in any rolling window (t − length, t] of `admissions` (sorted by t). */
export function fullest (admissions: readonly Admission[], length: number): { units: number, at: number } {
  let worst = { units: 0, at: 0 }
  let sum = 0
  for (let i = 0, j = 0; i < admissions.length; i++) {
    sum += admissions[i]!.cost
    while (admissions[j]!.t <= admissions[i]!.t - length) sum -= admissions[j++]!.cost
    if (sum > worst.units) worst = { units: sum, at: admissions[i]!.t }
  }
  return worst
}

function monthOf (ms: number): number {
  const d = new Date(ms)
  return d.getUTCFullYear() * 12 + d.getUTCMonth()
}

/** Every window of every consumer over its limit; `slackMs` shortens the rolling windows (a stated bound, not the invariant). */
export function violations (admissions: readonly Admission[], limits: ReadonlyMap<string, Limits>, slackMs = 0): Violation[] {
  const byConsumer = new Map<string, Admission[]>()
  for (const a of admissions) {
    const list = byConsumer.get(a.consumer)
    if (list === undefined) byConsumer.set(a.consumer, [a])
    else list.push(a)
  }
  const out: Violation[] = []
  for (const [consumer, list] of byConsumer) {
    const l = limits.get(consumer)!
    list.sort((a, b) => a.t - b.t)
    const minute = fullest(list, 60_000 - slackMs)
    if (minute.units > l.perMinute) out.push({ consumer, window: 'minute', limit: l.perMinute, units: minute.units, at: minute.at })
    const day = fullest(list, 86_400_000 - slackMs)
    if (day.units > l.perDay) out.push({ consumer, window: 'day', limit: l.perDay, units: day.units, at: day.at })
    if (l.perMonth > 0) {
      const months = new Map<number, number>()
      for (const a of list) months.set(monthOf(a.t), (months.get(monthOf(a.t)) ?? 0) + a.cost)
      for (const [m, units] of months) if (units > l.perMonth) out.push({ consumer, window: 'month', limit: l.perMonth, units, at: m })
    }
  }
  return out
}

/** What an exact per-request log admits of `arrivals` (sorted instants, one unit each) under a rolling-minute `limit`. */
export function ideal (arrivals: readonly number[], limit: number): number {
  const log: number[] = []
  let head = 0
  for (const t of arrivals) {
    while (head < log.length && log[head]! <= t - 60_000) head++
    if (log.length - head < limit) log.push(t)
  }
  return log.length
}
