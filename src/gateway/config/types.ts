// The shapes of a validated config snapshot: what every other gateway module reads, never the YAML.
export interface Limits {
  readonly perMinute: number
  readonly perDay: number
}

export interface KeyRecord {
  /** Non-secret id, safe for logs and admin output (never a metrics label). */
  readonly id: string
  readonly plan: string
  readonly limits: Limits
  readonly disabled: boolean
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
  readonly deprecated: Deprecation | undefined
  readonly stability: 'experimental' | 'beta' | undefined
}

export interface ConfigSnapshot {
  /** Short content hash of the three files: equal files, equal version. */
  readonly version: string
  readonly loadedAt: number
  /** Plan name → its limits; `undefined` for `custom` plans (limits come from each key). */
  readonly plans: ReadonlyMap<string, Limits | undefined>
  readonly anonymous: Limits
  readonly ban: BanPolicy
  readonly keysByDigest: ReadonlyMap<string, KeyRecord>
  readonly keysById: ReadonlyMap<string, KeyRecord>
  readonly routes: readonly RouteRule[]
}
