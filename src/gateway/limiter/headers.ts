// The rate-limit response headers, written by the limiter's onSend hook on every public response.
// The policy field depends only on the limits (and, with a month quota, on the calendar month, whose
// length is its window), so it is built once per limits object and month.
import type { FastifyReply } from 'fastify'
import type { Limits } from '../config/types.js'
import type { RateLimitDecision } from './decision.js'
import { calendarMonth } from './arithmetic.js'
import { announcedPolicies } from './shadow.js'

/** A limits object's policy field and the Unix ms range it holds for (a month quota's field changes with the month). */
interface CachedPolicy { readonly from: number, readonly until: number, readonly field: string }
const policies = new WeakMap<Limits, CachedPolicy>()
const RATELIMIT_PREFIX = { minute: '"minute";r=', day: '"day";r=', month: '"month";r=' } as const

/**
 * `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers-10): each policy's quota and window (the
 * month's: the length of the UTC month holding `now`), then announced shadow limits as the next ones.
 * A request whose `now` lies in the cached field's range reads it with one WeakMap lookup and two
 * comparisons (no Date per request); limits without a month quota hold for all time.
 */
export function policyField (limits: Limits, now: number): string {
  const cached = policies.get(limits)
  if (cached !== undefined && now >= cached.from && now < cached.until) return cached.field
  let from = -Infinity
  let until = Infinity
  let quota = ''
  if (limits.perMonth !== undefined) {
    const { start, end } = calendarMonth(now)
    from = start
    until = end
    quota = `, "month";q=${limits.perMonth};w=${(end - start) / 1000}`
  }
  const field = `"minute";q=${limits.perMinute};w=60, "day";q=${limits.perDay};w=86400${quota}${announcedPolicies(limits.shadow)}`
  policies.set(limits, { from, until, field })
  return field
}

export function setRateLimitHeaders (reply: FastifyReply, decision: RateLimitDecision): void {
  reply.header('x-ratelimit-limit', decision.limit)
  reply.header('x-ratelimit-remaining', decision.remaining)
  reply.header('x-ratelimit-reset', decision.reset)
  reply.header('ratelimit-policy', decision.policyField)
  reply.header('ratelimit', RATELIMIT_PREFIX[decision.window] + decision.remaining + ';t=' + decision.resetIn)
  if (decision.overage > 0) reply.header('x-quota-overage', decision.overage)
}
