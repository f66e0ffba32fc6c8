// The shapes of a validated config snapshot: what every other gateway module reads, never the YAML.
import type { WebhooksConfig } from '../webhooks/config.js'

export interface Limits {
  readonly perMinute: number
  readonly perDay: number
  /** Units per calendar month (UTC, from 00:00 on the 1st); undefined: no month quota. */
  readonly perMonth?: number | undefined
  /** Past perMonth: admit and count the overage (`overage: allow`), instead of `quota_exceeded`. */
  readonly overage?: boolean | undefined
  /** Limits being rehearsed: every decision's counts are compared with them too, nothing is enforced (docs/decisions.md §15). */
  readonly shadow?: ShadowLimits | undefined
}

/**
 * A plan's (or a key's) next limits, rehearsed before they are enforced: at least one window, each
 * below the enforced limit of its window (loader checks).
 */
export interface ShadowLimits {
  readonly perMinute: number | undefined
  readonly perDay: number | undefined
  readonly perMonth?: number | undefined
  /** Adds them to `RateLimit-Policy` as the next policy, so clients can adapt before enforcement. */
  readonly announce: boolean
}

/** `read`: GET and HEAD; `write`: every other method. */
export type Scope = 'read' | 'write'
export const ALL_SCOPES: readonly Scope[] = Object.freeze(['read', 'write'])

/** One credential (an entry of keys.yaml). */
export interface KeyRecord {
  /** Non-secret credential id, safe for logs and admin output (never a metrics label). */
  readonly id: string
  /**
   * The consumer this credential belongs to (default: its own id). Credentials of one consumer share
   * one set of windows, bans and usage: the limiter keys on it and `x-consumer-id` carries it.
   */
  readonly consumerId: string
  readonly plan: string
  readonly limits: Limits
  readonly disabled: boolean
  /** Unix ms from which the key answers 401 `key_expired`; undefined: never expires. */
  readonly expiresAt: number | undefined
  /** `expiresAt` as an IMF-fixdate, the `X-API-Key-Expires` value: formatted once per record, not per request. */
  readonly expiresHeader: string | undefined
  /** What the key may do; both by default. */
  readonly scopes: readonly Scope[]
}

export interface BanPolicy {
  readonly threshold: number
  readonly windowSeconds: number
  readonly durationSeconds: number
  readonly maxDurationSeconds: number
}

export interface Deprecation {
  /** Unix milliseconds of the deprecation date. */
  readonly since: number
  /** Unix milliseconds of the removal instant. */
  readonly sunset: number
  readonly successor: string | undefined
}

export interface RouteRule {
  readonly method: string
  readonly path: string
  /** Units a request of this route spends in every window (routes.yaml `cost`, default 1). */
  readonly cost: number
  readonly deprecated: Deprecation | undefined
  readonly stability: 'experimental' | 'beta' | undefined
}

/** Limits of requests without a valid key, per client: an IPv4 address or an IPv6 prefix of `ipv6Prefix` bits. */
export interface AnonymousPolicy extends Limits {
  readonly ipv6Prefix: number
}

export interface ConfigSnapshot {
  /** Short content hash of the three files: equal files, equal version. */
  readonly version: string
  readonly loadedAt: number
  /** Plan name → its limits; `undefined` for `custom` plans (limits come from each key). */
  readonly plans: ReadonlyMap<string, Limits | undefined>
  readonly anonymous: AnonymousPolicy
  readonly ban: BanPolicy
  readonly keysByDigest: ReadonlyMap<string, KeyRecord>
  readonly keysById: ReadonlyMap<string, KeyRecord>
  readonly routes: readonly RouteRule[]
  /** webhooks.yaml (webhooks/config.ts): endpoints with their secrets read; undefined without the file. */
  readonly webhooks?: WebhooksConfig | undefined
}
