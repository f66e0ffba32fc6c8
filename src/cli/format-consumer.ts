// Human-readable lines for `keys show` and `keys reset` from the admin API's JSON answers
// (`--json` prints the answer itself). Reads defensively: a field missing from an older gateway
// prints as "?" instead of crashing the command.
interface WindowView { count?: number, limit?: number, remaining?: number, resetAt?: string }
interface MonthView { count?: number, limit?: number | null, remaining?: number | null, resetAt?: string, overageAllowed?: boolean, overage?: number, shadow?: number | null }
interface BanView { until?: string | null, secondsLeft?: number, escalationLevel?: number | null }
interface CredentialView { id?: string, scopes?: string[], expiresAt?: string | null, expired?: boolean, disabled?: boolean }
interface ConsumerView {
  consumerId?: string
  plan?: string
  limits?: { perMinute?: number, perDay?: number, perMonth?: number, overage?: boolean }
  credentials?: CredentialView[]
  usage?: { minute?: WindowView, day?: WindowView, month?: MonthView | null }
  ban?: BanView
}

function window (name: string, w: WindowView | undefined): string {
  return `${name} ${w?.count ?? '?'}/${w?.limit ?? '?'} (${w?.remaining ?? '?'} left, resets ${w?.resetAt ?? '?'})`
}

/**
 * `month 850/1000 (85 %, 150 left, renews 2030-02-01T00:00:00.000Z)`; past a soft quota, the units
 * over it; a month only rehearsed by a shadow perMonth, its count against the shadow. Empty when no
 * month applies (or the gateway is older).
 */
function month (m: MonthView | null | undefined): string {
  if (m === null || m === undefined) return ''
  const renews = `renews ${m.resetAt ?? '?'}`
  if (m.limit === null || m.limit === undefined) return `; month ${m.count ?? '?'} (no quota; shadow ${m.shadow ?? '?'}/month rehearsed, ${renews})`
  const share = m.count === undefined ? '?' : String(Math.floor(m.count * 100 / m.limit))
  const over = (m.overage ?? 0) > 0 ? `, ${m.overage ?? '?'} over the quota (overage allowed: billed)` : `, ${m.remaining ?? '?'} left${m.overageAllowed === true ? ', overage allowed after' : ''}`
  return `; month ${m.count ?? '?'}/${m.limit} (${share} %${over}, ${renews})`
}

function limitsLine (l: ConsumerView['limits']): string {
  const quota = l?.perMonth === undefined ? '' : `, ${l.perMonth}/month${l.overage === true ? ' (overage allowed)' : ''}`
  return `${l?.perMinute ?? '?'}/min, ${l?.perDay ?? '?'}/day${quota}`
}

function ban (b: BanView | undefined): string {
  const level = b?.escalationLevel === null || b?.escalationLevel === undefined ? 'none' : String(b.escalationLevel)
  const state = b?.until === null || b?.until === undefined ? 'not banned' : `banned until ${b.until} (${b.secondsLeft ?? '?'} s left)`
  return `${state}; escalation level ${level}`
}

function credential (c: CredentialView): string {
  const state = c.disabled === true ? 'disabled' : c.expired === true ? 'EXPIRED' : 'active'
  const expires = c.expiresAt === null || c.expiresAt === undefined ? 'never expires' : `expires ${c.expiresAt}`
  return `  ${c.id ?? '?'}\t${state}\t${(c.scopes ?? []).join(',')}\t${expires}`
}

export function formatConsumer (body: Record<string, unknown>): string[] {
  const c = body as ConsumerView
  return [
    `consumer ${c.consumerId ?? '?'}: plan ${c.plan ?? '?'} (${limitsLine(c.limits)})`,
    'credentials:',
    ...(c.credentials ?? []).map(credential),
    `usage: ${window('minute', c.usage?.minute)}; ${window('day', c.usage?.day)}${month(c.usage?.month)}`,
    `ban: ${ban(c.ban)}`
  ]
}

export function formatReset (body: Record<string, unknown>): string {
  const r = body as { consumerId?: string, cleared?: { minute?: number, day?: number, month?: number | null, ban?: BanView } }
  const month = r.cleared?.month === null || r.cleared?.month === undefined ? '' : `, ${r.cleared.month} units this month`
  return `consumer ${r.consumerId ?? '?'} reset: cleared ${r.cleared?.minute ?? '?'} requests this minute, ` +
    `${r.cleared?.day ?? '?'} today${month}; ${ban(r.cleared?.ban)} before the reset`
}
