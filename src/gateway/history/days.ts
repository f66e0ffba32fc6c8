// UTC days and hours as the usage history and the shadow records count them: a decision belongs to
// the UTC day (and hour) of its own `now` — Redis TIME on a Redis store, so every gateway process
// files it under the same day whatever its own clock says. Days are numbered from 1970-01-01 (day
// 0), hours likewise; dates are written `YYYY-MM-DD`, months `YYYYMM` (the usage keys' suffix) and
// `YYYY-MM` in answers. A calendar month is the limiter's too: UTC, from 00:00 on the 1st.
export const DAY_MS = 86_400_000
export const HOUR_MS = 3_600_000

/** The UTC day of Unix ms `ms`. */
export function dayOf (ms: number): number {
  return Math.floor(ms / DAY_MS)
}

/** The UTC hour of Unix ms `ms`. */
export function hourOf (ms: number): number {
  return Math.floor(ms / HOUR_MS)
}

/** `2030-01-31` */
export function isoDay (day: number): string {
  return new Date(day * DAY_MS).toISOString().slice(0, 10)
}

/** The day a `YYYY-MM-DD` text names, or undefined when it is not one (`2030-02-30` is not). */
export function parseIsoDay (text: string): number | undefined {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text)
  if (match === null) return undefined
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])]
  const ms = Date.UTC(year, month - 1, day)
  const date = new Date(ms)
  if (date.getUTCFullYear() !== year || date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day) return undefined
  return ms / DAY_MS
}

export interface MonthOfDay {
  /** `203001` */
  readonly month: string
  /** 1 … 31 */
  readonly dayOfMonth: number
  /** The first day of the next month. */
  readonly nextMonth: number
}

export function monthOf (day: number): MonthOfDay {
  const date = new Date(day * DAY_MS)
  const year = date.getUTCFullYear()
  const month = date.getUTCMonth()
  return {
    month: `${year}${String(month + 1).padStart(2, '0')}`,
    dayOfMonth: date.getUTCDate(),
    nextMonth: Date.UTC(year, month + 1, 1) / DAY_MS
  }
}

/** The first day of the month `YYYYMM` and the first day of the next one. */
export function daysOfMonth (month: string): { first: number, next: number } {
  const year = Number(month.slice(0, 4))
  const index = Number(month.slice(4, 6)) - 1
  return { first: Date.UTC(year, index, 1) / DAY_MS, next: Date.UTC(year, index + 1, 1) / DAY_MS }
}

/** `203001` → `2030-01` */
export function isoMonth (month: string): string {
  return `${month.slice(0, 4)}-${month.slice(4, 6)}`
}
