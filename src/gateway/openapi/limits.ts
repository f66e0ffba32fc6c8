// What the OpenAPI document says about limits, from a config snapshot: the rate-limit headers (with
// the month's policy and X-Quota-Overage), the plan table (a per-month column once any plan or key
// has a monthly quota), the paragraph on 429s (rate_limited, quota_exceeded, key_banned) and a
// route's cost in units. Kept apart from document.ts, which assembles the operations.
import type { ConfigSnapshot, Limits, RouteRule } from '../config/types.js'
import type { JsonObject, JsonValue } from './document.js'

function header (description: string, schema: JsonObject, example?: JsonValue): JsonObject {
  return { description, schema, ...(example === undefined ? {} : { example }) }
}

/** The rate-limit headers, inlined where used (a Reference Object cannot carry `required`). */
export const RATE_LIMIT_HEADER_TEXT: Readonly<Record<string, JsonObject>> = {
  'X-RateLimit-Limit': header('The limit of the window that binds now (the one with the fewest units left; ties → the shorter window), in units: a request spends its operation\'s cost (1 unless the operation says otherwise)', { type: 'integer', minimum: 0 }, 60),
  'X-RateLimit-Remaining': header('Units left in that window', { type: 'integer', minimum: 0 }, 59),
  'X-RateLimit-Reset': header('Unix time (whole seconds, rounded up) when that window next frees capacity', { type: 'integer', minimum: 0 }, 1767225660),
  'RateLimit-Policy': header('Every window as draft-ietf-httpapi-ratelimit-headers-10 writes them: policies `minute` and `day`, and `month` for a key with a monthly quota, with quota `q` (units) and window `w` in seconds. ' +
    'The month is the calendar month in UTC (from 00:00 on the 1st), so its `w` is the length of the current month: 2419200 to 2678400', { type: 'string' }, '"minute";q=60;w=60, "day";q=1000;w=86400, "month";q=20000;w=2678400'),
  RateLimit: header('The binding policy per draft-ietf-httpapi-ratelimit-headers-10: remaining `r` and seconds until reset `t`', { type: 'string' }, '"minute";r=59;t=60'),
  'X-Quota-Overage': header('On a plan whose monthly quota admits overage: the units used past the quota this month (billed as overage); absent while within it', { type: 'integer', minimum: 1 }, 25)
}

export const RATE_LIMIT_HEADER_NAMES = ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'RateLimit-Policy', 'RateLimit'] as const

function hasQuota (snapshot: ConfigSnapshot): boolean {
  const quota = (l: Limits | undefined): boolean => l?.perMonth !== undefined
  return [...snapshot.plans.values()].some(quota) || [...snapshot.keysById.values()].some((k) => quota(k.limits))
}

function monthCell (limits: Limits): string {
  if (limits.perMonth === undefined) return '—'
  return limits.overage === true ? `${limits.perMonth} (overage allowed)` : String(limits.perMonth)
}

/** The plans' table: per minute and per day, and per month once there is a monthly quota. */
export function limitsTable (snapshot: ConfigSnapshot): string {
  const month = hasQuota(snapshot)
  const row = (cells: string[]): string => `| ${cells.join(' | ')} |`
  const rows = [...snapshot.plans].map(([plan, limits]) => limits === undefined
    ? row([plan, 'per key', 'per key', ...(month ? ['per key'] : [])])
    : row([plan, String(limits.perMinute), String(limits.perDay), ...(month ? [monthCell(limits)] : [])]))
  const anonymous = snapshot.anonymous
  rows.push(row(['without a valid key (per client IP)', String(anonymous.perMinute), String(anonymous.perDay), ...(month ? ['—'] : [])]))
  const head = month ? ['| plan | per minute | per day | per month |', '|---|---|---|---|'] : ['| plan | per minute | per day |', '|---|---|---|']
  return [...head, ...rows].join('\n')
}

/** What the description says of limits and 429s (`ban` from the config). */
export function limitsParagraphs (snapshot: ConfigSnapshot): string[] {
  const costs = snapshot.routes.filter((r) => r.cost !== 1)
  return [
    '**Limits.** Windows are sliding (any rolling 60 s and 86,400 s); a monthly quota counts the calendar month in UTC, from 00:00 on the 1st.\n\n' + limitsTable(snapshot),
    'Limits count units: a request spends its operation\'s cost in every window (1 unless the operation says otherwise' +
      (costs.length === 0 ? ')' : `; ${costs.map((r) => `\`${r.method} ${r.path}\` costs ${r.cost}`).join(', ')})`) +
      ' and is admitted only if every window has that many left. ' +
      'Every response carries `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` and the IETF `RateLimit-Policy` / `RateLimit` fields. ' +
      'Over a limit the answer is `429 rate_limited` with `Retry-After` (seconds): wait that long, then back off exponentially. ' +
      'A monthly quota used up is `429 quota_exceeded` (whenever the month is used up, even if a shorter window is too), with `Retry-After` until every full window admits a request again — at the earliest 00:00 UTC on the 1st: do not retry sooner. ' +
      'On a plan whose quota admits overage, requests past it are admitted and `X-Quota-Overage` says how many units this month are over it (billed as overage). ' +
      `A key that keeps sending after 429s (more than ${snapshot.ban.threshold} within ${snapshot.ban.windowSeconds} s) is banned for ${snapshot.ban.durationSeconds} s and more (\`429 key_banned\`); \`quota_exceeded\` never counts toward a ban.`
  ]
}

/** An operation's note on its cost, when it is not 1. */
export function costNote (rule: RouteRule | undefined): string | undefined {
  if (rule === undefined || rule.cost === 1) return undefined
  return `**Cost: ${rule.cost} units** of every window (minute, day, month): admitted only when each has ${rule.cost} left; the rate-limit headers count units.`
}
