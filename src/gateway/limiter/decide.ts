// Decision arithmetic: a store's answer and the limits applied → what the client is told (binding
// window, remaining, reset, Retry-After) and whether a shadow would have rejected it. Pure functions.
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

/**
 * An admitted or refused answer. The binding window is the one with fewest remaining (ties → the
 * shorter; a month whose overage is allowed never binds). A refusal is `quota_exceeded` whenever the
 * month refuses, else `rate_limited`; Retry-After waits until every window that refuses has room.
 */
export function decide (result: ConsumeResult, limits: Limits, policy: string, cost = 1): RateLimitDecision {
  const { minute, day } = result
  const month = limits.perMonth !== undefined ? result.month : undefined // counted only when enforced
  const minuteLeft = Math.max(0, limits.perMinute - minute.count)
  const dayLeft = Math.max(0, limits.perDay - day.count)
  let window: WindowName = dayLeft < minuteLeft ? 'day' : 'minute'
  let left = Math.min(minuteLeft, dayLeft)
  let state = window === 'day' ? day : minute
  const monthLeft = month === undefined ? Infinity : Math.max(0, limits.perMonth! - month.count)
  if (month !== undefined && limits.overage !== true && monthLeft < left) {
    window = 'month'
    left = monthLeft
    state = month
  }
  const reset = Math.ceil(state.resetAt / 1000)
  let retryAfter: number | undefined
  let rejectedBy: WindowName | undefined
  let outcome: RateLimitDecision['outcome'] = result.outcome === 'ban_started' ? 'key_banned' : result.outcome
  if (result.outcome === 'rate_limited') {
    rejectedBy = day.retryAt > minute.retryAt ? 'day' : 'minute'
    let retryAt = Math.max(minute.retryAt, day.retryAt)
    if (month !== undefined && month.retryAt > retryAt) {
      rejectedBy = 'month'
      retryAt = month.retryAt
    }
    retryAfter = secondsUntil(retryAt, result.now)
    if (month !== undefined && month.retryAt > 0 && limits.overage !== true) outcome = 'quota_exceeded'
  }
  const over = limits.overage === true && month !== undefined ? Math.max(0, month.count - limits.perMonth!) : 0
  return {
    allowed: result.outcome === 'ok',
    outcome,
    policy,
    window,
    limit: window === 'minute' ? limits.perMinute : window === 'day' ? limits.perDay : limits.perMonth!,
    remaining: left,
    reset,
    retryAfter,
    banStarted: result.outcome === 'ban_started',
    resetIn: Math.max(0, reset - Math.floor(result.now / 1000)),
    policyField: policyField(limits, result.now),
    rejectedBy,
    now: result.now,
    shadowRejectedBy: limits.shadow === undefined ? undefined : shadowRejection(result, limits.shadow),
    source: result.via ?? 'store',
    cost,
    overage: over,
    overageUnits: result.outcome === 'ok' ? Math.min(cost, over) : 0
  }
}

/** A banned consumer: nothing remaining until the ban ends, which is also the reset. */
export function bannedDecision (until: number, now: number, limits: Limits, policy: string, banStarted: boolean, source: DecisionSource = 'store', cost = 1): RateLimitDecision {
  const retryAfter = secondsUntil(until, now)
  return {
    allowed: false, outcome: 'key_banned', policy, window: 'minute', limit: limits.perMinute, remaining: 0, reset: Math.ceil(until / 1000),
    retryAfter, banStarted, resetIn: retryAfter, policyField: policyField(limits, now), rejectedBy: undefined, now,
    shadowRejectedBy: undefined, source, cost, overage: 0, overageUnits: 0
  }
}

/** The 503 of STORE_ON_ERROR=closed has no decision behind it: the policy's limits, nothing left, retry in 1 s. */
export function unavailableHeaders (limits: Limits, now: number): Record<string, string> {
  const retry = DEFAULT_UNAVAILABLE_RETRY_SECONDS
  return {
    'x-ratelimit-limit': String(limits.perMinute), 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(Math.ceil(now / 1000) + retry),
    'ratelimit-policy': policyField(limits, now), ratelimit: `"minute";r=0;t=${retry}`, 'retry-after': String(retry)
  }
}
