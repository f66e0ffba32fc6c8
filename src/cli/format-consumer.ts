// Human-readable lines for `keys show` and `keys reset` from the admin API's JSON answers
// (`--json` prints the answer itself). Reads defensively: a field missing from an older gateway
// prints as "?" instead of crashing the command.
interface WindowView { count?: number, limit?: number, remaining?: number, resetAt?: string }
interface BanView { until?: string | null, secondsLeft?: number, escalationLevel?: number | null }
interface CredentialView { id?: string, scopes?: string[], expiresAt?: string | null, expired?: boolean, disabled?: boolean }
interface ConsumerView {
  consumerId?: string
  plan?: string
  limits?: { perMinute?: number, perDay?: number }
  credentials?: CredentialView[]
  usage?: { minute?: WindowView, day?: WindowView }
  ban?: BanView
}

function window (name: string, w: WindowView | undefined): string {
  return `${name} ${w?.count ?? '?'}/${w?.limit ?? '?'} (${w?.remaining ?? '?'} left, resets ${w?.resetAt ?? '?'})`
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
    `consumer ${c.consumerId ?? '?'}: plan ${c.plan ?? '?'} (${c.limits?.perMinute ?? '?'}/min, ${c.limits?.perDay ?? '?'}/day)`,
    'credentials:',
    ...(c.credentials ?? []).map(credential),
    `usage: ${window('minute', c.usage?.minute)}; ${window('day', c.usage?.day)}`,
    `ban: ${ban(c.ban)}`
  ]
}

export function formatReset (body: Record<string, unknown>): string {
  const r = body as { consumerId?: string, cleared?: { minute?: number, day?: number, ban?: BanView } }
  return `consumer ${r.consumerId ?? '?'} reset: cleared ${r.cleared?.minute ?? '?'} requests this minute, ` +
    `${r.cleared?.day ?? '?'} today; ${ban(r.cleared?.ban)} before the reset`
}
