// Which credentials expire soon or have expired, from the config in force and the gateway clock:
// the reload/start log line and the gateway_keys_expiring / gateway_keys_expired gauges share it.
// Disabled credentials are left out: they answer 401 whatever their date says.
import type { ConfigSnapshot } from '../config/types.js'

/** The look-ahead of the log line, the gauge's `within="7d"` and the alert. */
export const DEFAULT_EXPIRY_WARNING_MS = 7 * 86_400_000
/** At most this many ids in the log line (100,000 keys must not make one huge line). */
export const DEFAULT_EXPIRY_LOG_IDS = 20

export interface ExpiringKey {
  readonly id: string
  readonly consumerId: string
  readonly expiresAt: number
}

export interface ExpiryCounts {
  /** Enabled credentials with now < expiresAt ≤ now + within. */
  readonly expiring: number
  /** Enabled credentials with expiresAt ≤ now (they answer 401 but are still in keys.yaml). */
  readonly expired: number
}

export function expiryCounts (snapshot: ConfigSnapshot, now: number, withinMs = DEFAULT_EXPIRY_WARNING_MS): ExpiryCounts {
  let expiring = 0
  let expired = 0
  for (const key of snapshot.keysById.values()) {
    if (key.disabled || key.expiresAt === undefined) continue
    if (key.expiresAt <= now) expired++
    else if (key.expiresAt <= now + withinMs) expiring++
  }
  return { expiring, expired }
}

/** Enabled credentials that expire within `withinMs` from now (not those already expired), soonest first. */
export function expiringKeys (snapshot: ConfigSnapshot, now: number, withinMs = DEFAULT_EXPIRY_WARNING_MS): ExpiringKey[] {
  const found: ExpiringKey[] = []
  for (const key of snapshot.keysById.values()) {
    if (key.disabled || key.expiresAt === undefined) continue
    if (key.expiresAt > now && key.expiresAt <= now + withinMs) found.push({ id: key.id, consumerId: key.consumerId, expiresAt: key.expiresAt })
  }
  return found.sort((a, b) => a.expiresAt - b.expiresAt)
}

interface WarnLogger { warn: (obj: object, msg: string) => void }

/** One warning line when keys expire within 7 days: ids and dates, capped; nothing otherwise. */
export function logExpiringKeys (log: WarnLogger, snapshot: ConfigSnapshot, now: number): void {
  const soon = expiringKeys(snapshot, now)
  if (soon.length === 0) return
  log.warn({
    count: soon.length,
    keys: soon.slice(0, DEFAULT_EXPIRY_LOG_IDS).map((k) => ({ id: k.id, consumer: k.consumerId, expiresAt: new Date(k.expiresAt).toISOString() })),
    truncated: soon.length > DEFAULT_EXPIRY_LOG_IDS
  }, 'keys expiring within 7 days')
}
