// The store made visible: what it is (kind and nodes, never credentials) and how it is doing, for
// /readyz, the start-up log and the store metrics. Readiness contacts the store for real; under
// STORE_ON_ERROR=local or open it stays ready while Redis fails but says `fallback`. At start a
// Redis whose maxmemory-policy may evict keys without a TTL (allkeys-*) is named: an anonymous
// flood could then evict keyed windows (the README's Redis section recommends noeviction or volatile-*).
import type { ConsumeResult, LimiterStore, StoreDescription } from './store.js'

/** `ok`: answering from its own state; `fallback`: STORE_ON_ERROR=local or open answers while Redis fails; `down`: not answering. */
export type StoreState = 'ok' | 'fallback' | 'down'

/** How the store is doing: the resilient store's (stores/resilient.ts), or a plain store's (plainHealth). */
export interface StoreHealth {
  /** Failed store calls so far (timeouts, connection errors). */
  errors: () => number
  /** True while a breaker is open and the STORE_ON_ERROR policy answers. A query: changes nothing. */
  fallbackActive: () => boolean
  /** True when the STORE_ON_ERROR policy gave this answer, not Redis (a ban it decided lasts only while Redis does not answer). */
  localAnswer: (result: ConsumeResult) => boolean
  /** Contacts the store for real: `ok` or `fallback`; rejects when no request can be answered (`down`). */
  probe: () => Promise<StoreState>
  /** Redis `maxmemory-policy`, or undefined (no Redis, or CONFIG not allowed). */
  maxmemoryPolicy: () => Promise<string | undefined>
}

/** A store without a fallback (the in-process store): no failures counted, ready while it answers a ping. */
export function plainHealth (store: LimiterStore): StoreHealth {
  return {
    errors: () => 0,
    fallbackActive: () => false,
    localAnswer: () => false,
    async probe () {
      await store.ping()
      return 'ok'
    },
    maxmemoryPolicy: async () => undefined
  }
}

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
export async function storeReport (store: LimiterStore, health: StoreHealth, warning: string | undefined): Promise<StoreReport> {
  const state = await health.probe()
  return { ...store.describe(), state, ...(warning === undefined ? {} : { warning }) }
}
