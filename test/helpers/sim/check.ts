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

/**
 * As `fullest`, for a list that holds forgotten admissions (`forgottenAt`: a crashed process's, its ledger gone, when
 * a later data loss forgot them): a window ending at t leaves out those a loss had forgotten by t. Redis counted
 * every other admission of the window by then (the re-seeds of the processes that lived), so only those are held
 * to the limit — the stated bound of the double fault. Windows ending before the loss count them all.
 */
function fullestRemembered (admissions: readonly Admission[], length: number): { units: number, at: number } {
  let worst = { units: 0, at: 0 }
  for (let i = 0, j = 0; i < admissions.length; i++) {
    const end = admissions[i]!.t
    while (admissions[j]!.t <= end - length) j++
    let sum = 0
    for (let k = j; k <= i; k++) if (!((admissions[k]!.forgottenAt ?? Infinity) <= end)) sum += admissions[k]!.cost
    if (sum > worst.units) worst = { units: sum, at: end }
  }
  return worst
}

function monthOf (ms: number): number {
  const d = new Date(ms)
  return d.getUTCFullYear() * 12 + d.getUTCMonth()
}

/** The windows of one consumer's `list` (sorted by t) over `limit` + `extra` units. */
function overLimit (consumer: string, list: readonly Admission[], limit: Limits, extra: number, slackMs: number): Violation[] {
  const out: Violation[] = []
  const bound = { perMinute: limit.perMinute + extra, perDay: limit.perDay + extra, perMonth: limit.perMonth > 0 ? limit.perMonth + extra : 0 }
  const measure = list.some((admission) => admission.forgottenAt !== undefined) ? fullestRemembered : fullest
  const minute = measure(list, 60_000 - slackMs)
  if (minute.units > bound.perMinute) out.push({ consumer, window: 'minute', limit: bound.perMinute, units: minute.units, at: minute.at })
  const day = measure(list, 86_400_000 - slackMs)
  if (day.units > bound.perDay) out.push({ consumer, window: 'day', limit: bound.perDay, units: day.units, at: day.at })
  if (bound.perMonth > 0) {
    const months = new Map<number, number>()
    for (const admission of list) months.set(monthOf(admission.t), (months.get(monthOf(admission.t)) ?? 0) + admission.cost)
    // With forgotten admissions, a month is checked at each of its admissions, leaving out what a loss had forgotten by then.
    if (measure === fullestRemembered) {
      for (const [i, end] of list.entries()) {
        let sum = 0
        for (const admission of list.slice(0, i + 1)) if (monthOf(admission.t) === monthOf(end.t) && !((admission.forgottenAt ?? Infinity) <= end.t)) sum += admission.cost
        months.set(monthOf(end.t), i === 0 || monthOf(list[i - 1]!.t) !== monthOf(end.t) ? sum : Math.max(sum, months.get(monthOf(end.t))!))
      }
    }
    for (const [month, units] of months) if (units > bound.perMonth) out.push({ consumer, window: 'month', limit: bound.perMonth, units, at: month })
  }
  return out
}

/**
 * Every window of every consumer over its limit. A consumer in `allowed` (STORE_ON_ERROR=local's outage allowance,
 * all processes together: docs/limiter-internals.md) may go over by that many units in all, but only through
 * admissions of the allowance (`via: 'allowance'`): what Redis granted and what the reserves admitted are still held
 * to the exact limit together, so a counting bug on the healthy path or in a reserve's write-back is not hidden by
 * the allowance.
 * `slackMs` shortens the rolling windows, `lost` (a failover's lost writes, per consumer) adds to every bound, and an
 * admission's `forgottenAt` (a crashed process's, forgotten by a later data loss) leaves it out of the windows that
 * end at or after that loss: stated bounds of faults outside the invariant (docs/simulator.md).
 */
export function violations (admissions: readonly Admission[], limits: ReadonlyMap<string, Limits>, allowed?: ReadonlyMap<string, number>, slackMs = 0, lost?: ReadonlyMap<string, number>): Violation[] {
  const byConsumer = new Map<string, Admission[]>()
  for (const admission of admissions) {
    const list = byConsumer.get(admission.consumer)
    if (list === undefined) byConsumer.set(admission.consumer, [admission])
    else list.push(admission)
  }
  const out: Violation[] = []
  for (const [consumer, list] of byConsumer) {
    const limit = limits.get(consumer)!
    const allowance = allowed?.get(consumer) ?? 0
    const lostUnits = lost?.get(consumer) ?? 0
    list.sort((a, b) => a.t - b.t)
    out.push(...overLimit(consumer, list, limit, allowance + lostUnits, slackMs))
    if (allowance > 0) out.push(...overLimit(consumer, list.filter((admission) => admission.via !== 'allowance'), limit, lostUnits, slackMs))
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
