// Decision arithmetic: a store's answer (counts, reset and retry instants, ban end) and the limits
// applied → what the client is told (binding window, remaining, reset, Retry-After), and whether the
// limits being rehearsed would have rejected it (shadow.ts: a comparison of the same counts). Pure
// functions of their arguments, so the headers of every outcome are tested without a store.
import type { Limits } from '../config/types.js'
import type { DecisionSource, RateLimitDecision, WindowName } from './decision.js'
import { policyField } from './headers.js'
import { shadowRejection } from './shadow.js'
import type { ConsumeResult } from './store.js'

/** STORE_ON_ERROR=closed: the 503's Retry-After and reset, in seconds. */
export const DEFAULT_UNAVAILABLE_RETRY_SECONDS = 1

/** Whole seconds from `now` to `ms`, at least 1 (a Retry-After of 0 invites a tight loop). */
export function secondsUntil (ms: number, now: number): number {
  return Math.max(1, Math.ceil((ms - now) / 1000))
}

/** An admitted or rate-limited answer: the binding window is the one with fewest remaining (ties → the minute). */
export function decide (result: ConsumeResult, limits: Limits, policy: string): RateLimitDecision {
  const minuteLeft = Math.max(0, limits.perMinute - result.minute.count)
  const dayLeft = Math.max(0, limits.perDay - result.day.count)
  const window: WindowName = dayLeft < minuteLeft ? 'day' : 'minute'
  const state = window === 'minute' ? result.minute : result.day
  const reset = Math.ceil(state.resetAt / 1000)
  let retryAfter: number | undefined
  let rejectedBy: WindowName | undefined
  if (result.outcome === 'rate_limited') {
    rejectedBy = result.day.retryAt > result.minute.retryAt ? 'day' : 'minute'
    retryAfter = secondsUntil(Math.max(result.minute.retryAt, result.day.retryAt), result.now)
  }
  return {
    allowed: result.outcome === 'ok',
    outcome: result.outcome === 'ban_started' ? 'key_banned' : result.outcome,
    policy,
    window,
    limit: window === 'minute' ? limits.perMinute : limits.perDay,
    remaining: window === 'minute' ? minuteLeft : dayLeft,
    reset,
    retryAfter,
    banStarted: result.outcome === 'ban_started',
    resetIn: Math.max(0, reset - Math.floor(result.now / 1000)),
    policyField: policyField(limits),
    rejectedBy,
    now: result.now,
    shadowRejectedBy: limits.shadow === undefined ? undefined : shadowRejection(result, limits.shadow),
    source: result.via ?? 'store'
  }
}

/** A banned consumer: nothing remaining until the ban ends, which is also the reset. */
export function bannedDecision (until: number, now: number, limits: Limits, policy: string, banStarted: boolean, source: DecisionSource = 'store'): RateLimitDecision {
  const retryAfter = secondsUntil(until, now)
  return {
    allowed: false,
    outcome: 'key_banned',
    policy,
    window: 'minute',
    limit: limits.perMinute,
    remaining: 0,
    reset: Math.ceil(until / 1000),
    retryAfter,
    banStarted,
    resetIn: retryAfter,
    policyField: policyField(limits),
    rejectedBy: undefined,
    now,
    shadowRejectedBy: undefined,
    source
  }
}

/** The 503 of STORE_ON_ERROR=closed has no decision behind it: the policy's limits, nothing left, retry in 1 s. */
export function unavailableHeaders (limits: Limits, now: number): Record<string, string> {
  const retry = DEFAULT_UNAVAILABLE_RETRY_SECONDS
  return {
    'x-ratelimit-limit': String(limits.perMinute),
    'x-ratelimit-remaining': '0',
    'x-ratelimit-reset': String(Math.ceil(now / 1000) + retry),
    'ratelimit-policy': policyField(limits),
    ratelimit: `"minute";r=0;t=${retry}`,
    'retry-after': String(retry)
  }
}
