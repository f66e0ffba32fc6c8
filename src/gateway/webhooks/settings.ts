// The webhooks' settings from the environment, beside their defaults (the endpoints themselves come
// from webhooks.yaml only). A value that is not a positive integer stops the start, naming the variable.
import { DEFAULT_POLL_MS } from './deliver.js'
import { DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_RESPONSE_TIMEOUT_MS } from './http.js'
import type { WebhookOptions } from './plugin.js'
import { DEFAULT_CLAIM_IDLE_MS } from './redis-queue.js'

const VARIABLES = {
  WEBHOOK_POLL_MS: ['pollMs', DEFAULT_POLL_MS],
  WEBHOOK_CLAIM_IDLE_MS: ['claimIdleMs', DEFAULT_CLAIM_IDLE_MS],
  WEBHOOK_CONNECT_TIMEOUT_MS: ['connectTimeoutMs', DEFAULT_CONNECT_TIMEOUT_MS],
  WEBHOOK_RESPONSE_TIMEOUT_MS: ['responseTimeoutMs', DEFAULT_RESPONSE_TIMEOUT_MS],
  WEBHOOK_MAX_RESPONSE_BYTES: ['maxResponseBytes', DEFAULT_MAX_RESPONSE_BYTES]
} as const

export function webhookSettingsFromEnv (env: Readonly<Record<string, string | undefined>>): WebhookOptions {
  const options: Record<string, number> = {}
  for (const [name, [option, fallback]] of Object.entries(VARIABLES)) {
    const text = env[name]
    if (text === undefined || text === '') {
      options[option] = fallback
      continue
    }
    const value = Number(text)
    if (!Number.isSafeInteger(value) || value <= 0) throw new Error(`${name}: must be a positive integer of milliseconds (or bytes), not "${text}"`)
    options[option] = value
  }
  return options satisfies WebhookOptions
}
