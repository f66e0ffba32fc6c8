// The store made visible: what it is (kind and nodes, never credentials) and how it is doing, for
// /readyz and the start-up log. Readiness contacts the store for real; under STORE_ON_ERROR=local
// or open it stays ready while Redis fails but says `fallback`. At start a Redis whose
// maxmemory-policy may evict keys without a TTL (allkeys-*) is named: an anonymous flood could then
// evict keyed windows (the README's Redis section recommends noeviction or volatile-*).
import type { LimiterStore, StoreDescription, StoreState } from './store.js'

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
export async function storeReport (store: LimiterStore, warning: string | undefined): Promise<StoreReport> {
  let state: StoreState
  if (store.probe !== undefined) {
    state = await store.probe()
  } else {
    await store.ping()
    state = 'ok'
  }
  return { ...store.describe(), state, ...(warning === undefined ? {} : { warning }) }
}
