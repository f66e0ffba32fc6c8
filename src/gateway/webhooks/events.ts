// The events the gateway tells, as Standard Webhooks payloads (`type`, `timestamp`, `data`), and the
// key that makes each one happen once: a consumer and share of its month's quota, a month's first
// refusal, a ban, a key's expiry and a look-ahead. The payload names the consumer, its plan, the
// window and the counts at the crossing — never a credential or a key's digest (a key's `id` is the
// non-secret name keys.yaml gives it). An event's webhook-id is derived from its once-key, so the
// same event carries the same id on every attempt and from every process.
import { createHash } from 'node:crypto'
import type { WebhookEvent } from './config.js'

/** A period the events of a month belong to: `2030-03`. */
export function monthPeriod (ms: number): string {
  return new Date(ms).toISOString().slice(0, 7)
}

/** Unix ms of the first instant after the month `ms` falls in (UTC). */
export function monthEnd (ms: number): number {
  const d = new Date(ms)
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1)
}

/** A once-key outlives its period by this much, so a late process (a clock behind, a retry) still finds it. */
export const ONCE_MARGIN_MS = 35 * 86_400_000

/** One event, detected: what to send, and the key that lets it be emitted once. */
/** What `webhooks test` sends, beside the configured events. */
export const TEST_EVENT = 'webhook.test'
export type EventType = WebhookEvent | typeof TEST_EVENT

export interface DetectedEvent {
  /** `msg_…`, the webhook-id of every delivery of it. */
  readonly id: string
  readonly type: EventType
  /** Unix ms of the crossing (the decision's or the count's time). */
  readonly at: number
  readonly data: Readonly<Record<string, string | number | boolean>>
  /** Consumer (or key) + event + period + threshold: the event is emitted once per key. */
  readonly once: string
  /** How long the once-key is kept: past the end of its period. */
  readonly onceTtlMs: number
}

export function eventId (once: string): string {
  return `msg_${createHash('sha256').update(once).digest('base64url').slice(0, 27)}`
}

/** The body every delivery of the event sends. */
export function eventBody (event: DetectedEvent): string {
  return JSON.stringify({ type: event.type, timestamp: new Date(event.at).toISOString(), data: event.data })
}

function event (type: EventType, at: number, once: string, until: number, data: DetectedEvent['data']): DetectedEvent {
  return Object.freeze({ id: eventId(once), type, at, data: Object.freeze(data), once, onceTtlMs: Math.max(until - at, 0) + ONCE_MARGIN_MS })
}

export interface QuotaCrossing {
  readonly consumerId: string
  readonly plan: string
  /** Units of the month counted at the crossing, and the month's quota (perMonth). */
  readonly units: number
  readonly limit: number
  /** The share crossed: 0.8, 1, or an overage step (1.5). */
  readonly threshold: number
  readonly at: number
}

export function quotaThreshold (crossing: QuotaCrossing): DetectedEvent {
  const period = monthPeriod(crossing.at)
  return event('quota.threshold', crossing.at, `quota.threshold:${crossing.consumerId}:${period}:${crossing.threshold}`, monthEnd(crossing.at), {
    consumerId: crossing.consumerId,
    plan: crossing.plan,
    window: 'month',
    period,
    threshold: crossing.threshold,
    units: crossing.units,
    limit: crossing.limit
  })
}

/** The month's first refusal (`quota_exceeded`) of a consumer. */
export function quotaExceeded (refusal: Omit<QuotaCrossing, 'threshold'>): DetectedEvent {
  const period = monthPeriod(refusal.at)
  return event('quota.exceeded', refusal.at, `quota.exceeded:${refusal.consumerId}:${period}`, monthEnd(refusal.at), {
    consumerId: refusal.consumerId,
    plan: refusal.plan,
    window: 'month',
    period,
    units: refusal.units,
    limit: refusal.limit
  })
}

/** A ban that started: until when, and the window whose 429s led to it. */
export function keyBanned (ban: { consumerId: string, plan: string, window: string, limit: number, until: number, at: number }): DetectedEvent {
  return event('key.banned', ban.at, `key.banned:${ban.consumerId}:${ban.until}`, ban.until, {
    consumerId: ban.consumerId,
    plan: ban.plan,
    window: ban.window,
    limit: ban.limit,
    bannedUntil: new Date(ban.until).toISOString()
  })
}

/** A key (by its non-secret id) whose expiry is `days` away or less. */
export function keyExpiring (key: { keyId: string, consumerId: string, plan: string, expiresAt: number, days: number, at: number }): DetectedEvent {
  return event('key.expiring', key.at, `key.expiring:${key.keyId}:${key.expiresAt}:${key.days}`, key.expiresAt, {
    consumerId: key.consumerId,
    keyId: key.keyId,
    plan: key.plan,
    days: key.days,
    expiresAt: new Date(key.expiresAt).toISOString()
  })
}

/** What `webhooks test` sends: not once-keyed (each test is its own event). */
export function testEvent (endpoint: string, at: number, nonce: string): DetectedEvent {
  return event(TEST_EVENT, at, `test:${endpoint}:${nonce}`, at, { endpoint, message: 'a test event from the gateway: signatures verify, nothing else happened' })
}
