// Tables (and CSV) from the admin API's history answers: `keys usage` (a consumer's usage per UTC
// day), the day-by-day lines of `keys show`, and `plans shadow` (who a plan's shadow limits would
// have rejected). Reads defensively like format-consumer.ts: a missing field prints as "?".
export interface UsageDayView { date?: string, admitted?: number, rejected?: number, total?: number }
export interface UsageView {
  consumerId?: string
  plan?: string
  scope?: string
  counts?: string
  from?: string
  to?: string
  days?: UsageDayView[]
  total?: { admitted?: number, rejected?: number, total?: number }
}
interface ShadowRow { consumerId?: string, rejections?: number, admitted?: number, first?: string, last?: string }
interface ShadowView {
  plan?: string
  limits?: { perMinute?: number, perDay?: number } | string
  shadow?: { perMinute?: number, perDay?: number, announce?: boolean } | null
  counts?: string
  since?: string
  until?: string
  consumers?: number
  rejections?: number
  complete?: boolean
  untracked?: number
  top?: ShadowRow[]
}

const text = (value: unknown): string => value === undefined || value === null ? '?' : String(value)

/** Columns padded to their widest cell, two spaces apart; numbers right-aligned. */
export function table (header: readonly string[], rows: ReadonlyArray<readonly string[]>): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const numeric = header.map((_, i) => rows.length > 0 && rows.every((r) => /^\d+$/.test(r[i] ?? '')))
  const line = (cells: readonly string[]): string => cells
    .map((c, i) => numeric[i] === true ? c.padStart(widths[i] ?? 0) : c.padEnd(widths[i] ?? 0))
    .join('  ')
    .trimEnd()
  return [line(header), ...rows.map(line)]
}

function dayRows (view: UsageView): string[][] {
  return (view.days ?? []).map((d) => [text(d.date), text(d.admitted), text(d.rejected), text(d.total)])
}

export function formatUsage (body: Record<string, unknown>): string[] {
  const view = body as UsageView
  return [
    `consumer ${text(view.consumerId)} (plan ${text(view.plan)}): requests per UTC day, ${text(view.from)} to ${text(view.to)}; counts of ${text(view.counts)}`,
    ...table(['date', 'admitted', 'rejected', 'total'], [
      ...dayRows(view),
      ['total', text(view.total?.admitted), text(view.total?.rejected), text(view.total?.total)]
    ])
  ]
}

const csvCell = (value: string): string => /[",\n]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value

/** For billing: one line per day, the consumer on every line, no total line. */
export function usageCsv (body: Record<string, unknown>): string[] {
  const view = body as UsageView
  return [
    'date,consumer,plan,admitted,rejected,total',
    ...(view.days ?? []).map((d) => [text(d.date), text(view.consumerId), text(view.plan), text(d.admitted), text(d.rejected), text(d.total)].map(csvCell).join(','))
  ]
}

/** The day-by-day lines `keys show` ends with: the last `days` of the answer. */
export function formatUsageDays (body: Record<string, unknown>, days: number): string[] {
  const view = body as UsageView
  const rows = dayRows(view).slice(-days).map(([date, ...rest]) => [`  ${date ?? ''}`, ...rest])
  return [`usage by UTC day (${text(view.counts)}):`, ...table(['  date', 'admitted', 'rejected', 'total'], rows)]
}

function limitsText (view: ShadowView): string {
  if (view.limits === 'custom') return 'custom plan: each key\'s own limits and shadow'
  const limits = typeof view.limits === 'object' ? `${text(view.limits.perMinute)}/min, ${text(view.limits.perDay)}/day` : text(view.limits)
  const shadow = view.shadow
  if (shadow === null || shadow === undefined) return `enforced ${limits}; no shadow in the config now`
  const parts = [shadow.perMinute === undefined ? '' : `${shadow.perMinute}/min`, shadow.perDay === undefined ? '' : `${shadow.perDay}/day`].filter((p) => p !== '')
  return `enforced ${limits}; shadow ${parts.join(', ')}${shadow.announce === true ? ' (announced)' : ''}`
}

export function formatShadow (body: Record<string, unknown>): string[] {
  const view = body as ShadowView
  const top = view.top ?? []
  const head = [
    `plan ${text(view.plan)}: ${limitsText(view)}`,
    `since ${text(view.since)}: ${view.complete === false ? 'about ' : ''}${text(view.consumers)} consumers would have been rejected ${text(view.rejections)} times (counts of ${text(view.counts)})`,
    // The records keep each hour's heaviest consumers only (docs/decisions.md §15).
    ...(view.complete === false ? [`some hours had more consumers than their records keep: the lightest were dropped, ${text(view.untracked)} of those rejections are not in any consumer's count`] : [])
  ]
  if (top.length === 0) return head
  return [
    ...head,
    ...table(['consumer', 'would-reject', 'admitted-now', 'first', 'last'],
      top.map((r) => [text(r.consumerId), text(r.rejections), text(r.admitted), text(r.first), text(r.last)]))
  ]
}
