// Standard Webhooks signing (https://www.standardwebhooks.com/): the three headers every delivery
// carries, so any receiver verifies it with the `standardwebhooks` package or Svix's libraries. The
// signature is HMAC-SHA256 over `id.timestamp.body` keyed with the base64 bytes after `whsec_`; with
// a previous secret still configured (a rotation's overlap) both sign, space-separated, and a
// receiver holding either one accepts the delivery.
import { createHmac } from 'node:crypto'

export interface WebhookHeaders {
  'webhook-id': string
  'webhook-timestamp': string
  'webhook-signature': string
  'content-type': 'application/json'
}

function keyOf (secret: string): Buffer {
  return Buffer.from(secret.slice('whsec_'.length), 'base64')
}

/** `v1,<base64>` for each secret, space-separated, the current secret first. */
export function signature (secrets: readonly string[], id: string, timestampSeconds: number, body: string): string {
  return secrets.map((secret) => `v1,${createHmac('sha256', keyOf(secret)).update(`${id}.${timestampSeconds}.${body}`).digest('base64')}`).join(' ')
}

/** The headers of one delivery attempt: the event's id (the same on every attempt), the attempt's time, the signatures. */
export function webhookHeaders (secrets: readonly string[], id: string, nowMs: number, body: string): WebhookHeaders {
  const timestamp = Math.floor(nowMs / 1000)
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signature(secrets, id, timestamp, body),
    'content-type': 'application/json'
  }
}
