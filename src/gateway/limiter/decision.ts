// What the limiter decided for one request, as the rest of the gateway reads it (response headers,
// metrics, logs, the usage history and shadow records).
import type { KeyRecord } from '../config/types.js'

export type WindowName = 'minute' | 'day' | 'month'

export interface RateLimitDecision {
  readonly allowed: boolean
  /** `ok` admitted; `rate_limited` over a window; `quota_exceeded` the month's quota used up; `key_banned` banned (now or before). */
  readonly outcome: 'ok' | 'rate_limited' | 'quota_exceeded' | 'key_banned'
  /** Plan name, or `anonymous` for requests counted per client IP. */
  readonly policy: string
  /** The binding window (fewest remaining; ties → the shorter window). */
  readonly window: WindowName
  readonly limit: number
  readonly remaining: number
  /** Unix seconds when the binding window next frees capacity. */
  readonly reset: number
  /** Seconds to wait, on a 429. */
  readonly retryAfter: number | undefined
  /** True on the one 429 that crossed the ban threshold and started a ban. */
  readonly banStarted: boolean
  /** Seconds from now to `reset` (the `t` of the IETF `RateLimit` field). */
  readonly resetIn: number
  /** The IETF `RateLimit-Policy` field value for the limits applied. */
  readonly policyField: string
  /** On `rate_limited`: the full window that admits again last (the one `retryAfter` waits for). */
  readonly rejectedBy: WindowName | undefined
  /** Unix ms of the decision: the store's clock (Redis TIME on Redis), the gateway's for a ban cached in process. */
  readonly now: number
  /** The window whose shadow limit would have rejected this request (limiter/shadow.ts); undefined when none would. */
  readonly shadowRejectedBy: WindowName | undefined
  /** Where it was decided: a store call, units this process held (no call), the STORE_ON_ERROR policy, or a ban cached in this process. */
  readonly source: DecisionSource
  /** Units spent by this request (its route's cost). */
  readonly cost: number
  /** `overage: allow`: units over the month's quota so far this month (0: within it). */
  readonly overage: number
  /** Of those, this admitted request's own (what gateway_quota_overage_total and the usage history add). */
  readonly overageUnits: number
}

export type DecisionSource = 'store' | 'grant' | 'fallback' | 'ban-cache'

/** Told every decision about a consumer, in the request, so it must only count (history/tally.ts writes later). */
export interface DecisionRecorder {
  note: (consumer: KeyRecord, decision: RateLimitDecision) => void
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the limiter's onRequest hook; null before it ran or when no limiter is registered. */
    rateLimit: RateLimitDecision | null
  }
}
