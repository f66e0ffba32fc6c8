// Tables (and CSV) from the admin API's history answers: `keys usage` (a consumer's requests and
// units per UTC day, with the overage of a soft quota, and the months those days are in), the
// day-by-day lines of `keys show`, and `plans shadow` (who a plan's shadow limits would have
// rejected). Reads defensively like format-consumer.ts: a missing field prints as "?".
export interface UsageDayView { date?: string, admitted?: number, units?: number, rejected?: number, total?: number, overage?: number }
interface UsageMonthView { month?: string, units?: number, overage?: number }
export interface UsageView {
  consumerId?: string
  plan?: string
  scope?: string
  counts?: string
  from?: string
  to?: string
  days?: UsageDayView[]
  total?: UsageDayView
  months?: UsageMonthView[]
  perMonth?: number | null
  overageAllowed?: boolean
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

const USAGE_HEADER = ['date', 'admitted', 'units', 'rejected', 'total', 'overage'] as const

function usageRow (first: string, d: UsageDayView | undefined): string[] {
  return [first, text(d?.admitted), text(d?.units), text(d?.rejected), text(d?.total), text(d?.overage)]
}

function dayRows (view: UsageView): string[][] {
  return (view.days ?? []).map((d) => usageRow(text(d.date), d))
}

/** `month 2030-03: 26 units of a quota of 20/month, 6 over (overage allowed: billed)` */
function monthLine (m: UsageMonthView, view: UsageView): string {
  const units = `month ${text(m.month)}: ${text(m.units)} unit${m.units === 1 ? '' : 's'}`
  if (view.perMonth === null || view.perMonth === undefined) return `${units} (no monthly quota)`
  const over = (m.overage ?? 0) > 0 ? `, ${text(m.overage)} over (overage allowed: billed)` : view.overageAllowed === true ? ' (overage allowed)' : ''
  return `${units} of a quota of ${view.perMonth}/month${over}`
}

export function formatUsage (body: Record<string, unknown>): string[] {
  const view = body as UsageView
  return [
    `consumer ${text(view.consumerId)} (plan ${text(view.plan)}): requests and units per UTC day, ${text(view.from)} to ${text(view.to)}; counts of ${text(view.counts)}`,
    ...table(USAGE_HEADER, [...dayRows(view), usageRow('total', view.total)]),
    ...(view.months ?? []).map((m) => monthLine(m, view))
  ]
}

const csvCell = (value: string): string => /[",\n]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value

/**
 * For billing: one line per day, the consumer on every line, no total line. The columns added with
 * costs and soft quotas come last (units spent, units over the month's quota), so a reader of the
 * first six columns reads them as before.
 */
export function usageCsv (body: Record<string, unknown>): string[] {
  const view = body as UsageView
  return [
    'date,consumer,plan,admitted,rejected,total,units,overage',
    ...(view.days ?? []).map((d) => [d.date, view.consumerId, view.plan, d.admitted, d.rejected, d.total, d.units, d.overage].map((v) => csvCell(text(v))).join(','))
  ]
}

/** The day-by-day lines `keys show` ends with: the last `days` of the answer. */
export function formatUsageDays (body: Record<string, unknown>, days: number): string[] {
  const view = body as UsageView
  const rows = dayRows(view).slice(-days).map(([date, ...rest]) => [`  ${date ?? ''}`, ...rest])
  return [`usage by UTC day (${text(view.counts)}):`, ...table(['  date', ...USAGE_HEADER.slice(1)], rows)]
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
