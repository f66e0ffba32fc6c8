// The store made visible: what it is (kind and nodes, never credentials) and how it is doing, for
// /readyz, the start-up log and the store metrics. Readiness contacts the store for real; under
// STORE_ON_ERROR=local or open it stays ready while Redis fails but says `fallback`. At start a
// Redis whose maxmemory-policy may evict keys without a TTL (allkeys-*) is named: an anonymous
// flood could then evict keyed windows (docs/operations.md recommends noeviction or volatile-*).
import type { StoreDescription } from './store.js'

/** `ok`: answering from its own state; `fallback`: STORE_ON_ERROR=local or open answers while Redis fails; `down`: not answering. */
export type StoreState = 'ok' | 'fallback' | 'down'

export interface StoreHealth {
  /** Failed store calls so far (timeouts, connection errors). */
  errors: () => number
  /** True while STORE_ON_ERROR answers for some ids (a shard does not answer), or what it admitted is not yet counted in Redis. */
  fallbackActive: () => boolean
  /** Contacts the store for real: `ok` or `fallback`; rejects when no request can be answered (`down`). */
  probe: () => Promise<StoreState>
  /** Redis `maxmemory-policy`, or undefined (no Redis, or CONFIG not allowed). */
  maxmemoryPolicy: () => Promise<string | undefined>
}

/** The in-process store's health: no failures, always answering. */
export const IN_PROCESS_HEALTH: StoreHealth = Object.freeze({
  errors: () => 0,
  fallbackActive: () => false,
  probe: async () => 'ok' as const,
  maxmemoryPolicy: async () => undefined
})

export interface StoreReport extends StoreDescription {
  readonly state: StoreState
  /** Set when the maxmemory-policy can evict the limiter's keys under memory pressure. */
  readonly warning?: string
}

/** Policies that may evict a key whatever its TTL; volatile-* and noeviction leave keys without a TTL alone. */
export function evictionWarning (policy: string | undefined): string | undefined {
  if (policy === undefined || !policy.startsWith('allkeys-')) return undefined
  return `Redis maxmemory-policy ${policy} can evict rate-limit windows under memory pressure; use noeviction or volatile-*`
}

/** Readiness of the store: resolves with its report, rejects when it cannot answer requests. */
export async function storeReport (description: StoreDescription, health: StoreHealth, warning: string | undefined): Promise<StoreReport> {
  const state = await health.probe()
  return { ...description, state, ...(warning === undefined ? {} : { warning }) }
}
