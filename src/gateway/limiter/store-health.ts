// The store made visible, for /readyz, the start-up log and the store metrics. Readiness contacts
// the store for real; under STORE_ON_ERROR=local or open it stays ready while Redis fails but says
// `fallback`. A Redis whose maxmemory-policy may evict keys without a TTL (allkeys-*) is named at
// start: an anonymous flood could then evict keyed windows.

/** `ok`: answering from its own state; `fallback`: STORE_ON_ERROR=local or open answers while Redis fails; `down`: not answering. */
export type StoreState = 'ok' | 'fallback' | 'down'

/**
 * Failed store calls so far; whether STORE_ON_ERROR answers for some ids or its admissions are not yet
 * counted in Redis; a real contact (rejects when `down`); Redis `maxmemory-policy` (undefined: unknown).
 */
export interface StoreHealth {
  errors: () => number
  fallbackActive: () => boolean
  /** Requests admitted while their shard did not answer, by kind (STORE_ON_ERROR=local or strict), since start. */
  outageAdmissions: () => OutageAdmissions
  probe: () => Promise<StoreState>
  maxmemoryPolicy: () => Promise<string | undefined>
}

/** Outage admissions by kind: from the process's reserve, from the outage allowance. */
export interface OutageAdmissions { readonly reserve: number, readonly allowance: number }

/** The in-process store's health: no failures, always answering. */
export const IN_PROCESS_HEALTH: StoreHealth = Object.freeze({
  errors: () => 0,
  fallbackActive: () => false,
  outageAdmissions: () => ({ reserve: 0, allowance: 0 }),
  probe: async () => 'ok' as const,
  maxmemoryPolicy: async () => undefined
})

/** Policies that may evict a key whatever its TTL; volatile-* and noeviction leave keys without a TTL alone. */
export function evictionWarning (policy: string | undefined): string | undefined {
  if (policy === undefined || !policy.startsWith('allkeys-')) return undefined
  return `Redis maxmemory-policy ${policy} can evict rate-limit windows under memory pressure; use noeviction or volatile-*`
}
