// Shadow limits: the limits a plan (or a key) is rehearsing, compared with the counts every decision
// already has — no Redis state, no call. A request is a shadow rejection iff the window's count
// *before* it is at or over the shadow limit (docs/decisions.md §15): with shadow 30 the 31st request
// of a window is the first, whatever the enforced limit answered.
import type { ShadowLimits } from '../config/types.js'
import type { WindowName } from './decision.js'
import type { ConsumeResult } from './store.js'

/** The window whose shadow limit would have rejected this counted request (the longest when several), or undefined. */
export function shadowRejection (result: ConsumeResult, shadow: ShadowLimits): WindowName | undefined {
  const own = result.outcome === 'ok' ? 1 : 0
  if (shadow.perMonth !== undefined && result.month !== undefined && result.month.count - own >= shadow.perMonth) return 'month'
  if (shadow.perDay !== undefined && result.day.count - own >= shadow.perDay) return 'day'
  if (shadow.perMinute !== undefined && result.minute.count - own >= shadow.perMinute) return 'minute'
  return undefined
}

/** The shadow as further `RateLimit-Policy` items (`"next-minute";q=30;w=60`) when announced, else ''. */
export function announcedPolicies (shadow: ShadowLimits | undefined): string {
  if (shadow?.announce !== true) return ''
  const item = (name: string, quality: number | undefined, weight: string): string => quality === undefined ? '' : `, "next-${name}";q=${quality}${weight}`
  return item('minute', shadow.perMinute, ';w=60') + item('day', shadow.perDay, ';w=86400') + item('month', shadow.perMonth, '')
}
