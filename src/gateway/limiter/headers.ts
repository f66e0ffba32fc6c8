// The rate-limit response headers, written by the limiter's onSend hook on every public response.
// The policy field depends only on the limits, so it is built once per limits object.
import type { FastifyReply } from 'fastify'
import type { Limits } from '../config/types.js'
import type { RateLimitDecision } from './decision.js'
import { announcedPolicies } from './shadow.js'

const policies = new WeakMap<Limits, string>()
const RATELIMIT_PREFIX = { minute: '"minute";r=', day: '"day";r=' } as const

/**
 * `RateLimit-Policy` per draft-ietf-httpapi-ratelimit-headers-10: quota and window of both policies,
 * then the shadow limits as the next policies when the operator announces them (the draft allows
 * several policies; a client that knows none of these names ignores them).
 */
export function policyField (limits: Limits): string {
  let field = policies.get(limits)
  if (field === undefined) {
    field = `"minute";q=${limits.perMinute};w=60, "day";q=${limits.perDay};w=86400${announcedPolicies(limits.shadow)}`
    policies.set(limits, field)
  }
  return field
}

export function setRateLimitHeaders (reply: FastifyReply, decision: RateLimitDecision): void {
  reply.header('x-ratelimit-limit', decision.limit)
  reply.header('x-ratelimit-remaining', decision.remaining)
  reply.header('x-ratelimit-reset', decision.reset)
  reply.header('ratelimit-policy', decision.policyField)
  reply.header('ratelimit', RATELIMIT_PREFIX[decision.window] + decision.remaining + ';t=' + decision.resetIn)
}
