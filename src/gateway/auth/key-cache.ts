// Bearer token → key record, remembered so that a key seen again costs one map lookup instead of a
// SHA-256 digest (plus its hex string) per request. Bounded, with second-chance eviction (a hit only
// marks its entry, no list move per request; the order is stated in src/shared/second-chance-map.ts),
// and scoped to one config snapshot: each snapshot gets a cache of its own, so a reload that disables,
// removes or re-plans a key takes effect with the first request on the new snapshot, and the old
// cache goes with the old snapshot.
// Only hits are cached: a flood of guessed tokens (all misses) can neither grow it nor evict the
// keys of real clients. The plaintext stays in this process's memory, as it already is while the
// request is read; it is never logged or exported.
import type { ConfigSnapshot, KeyRecord } from '../config/types.js'
import { SecondChanceMap } from '../../shared/second-chance-map.js'
import { keyDigest } from './bearer.js'

/** Distinct keys remembered per snapshot; more active keys than this digest on a miss, as without a cache. */
export const DEFAULT_KEY_LOOKUP_CACHE_SIZE = 10_000

export type KeyLookup = (snapshot: ConfigSnapshot, token: string) => KeyRecord | undefined

export function createKeyLookup (max = DEFAULT_KEY_LOOKUP_CACHE_SIZE): KeyLookup {
  const caches = new WeakMap<ConfigSnapshot, SecondChanceMap<string, KeyRecord>>()
  let lastSnapshot: ConfigSnapshot | undefined
  let lastCache: SecondChanceMap<string, KeyRecord> | undefined

  function cacheOf (snapshot: ConfigSnapshot): SecondChanceMap<string, KeyRecord> {
    if (snapshot === lastSnapshot && lastCache !== undefined) return lastCache
    let cache = caches.get(snapshot)
    if (cache === undefined) {
      cache = new SecondChanceMap<string, KeyRecord>(max)
      caches.set(snapshot, cache)
    }
    lastSnapshot = snapshot
    lastCache = cache
    return cache
  }

  return function lookup (snapshot, token) {
    const cache = cacheOf(snapshot)
    const cached = cache.get(token)
    if (cached !== undefined) return cached
    const record = snapshot.keysByDigest.get(keyDigest(token))
    if (record !== undefined) cache.set(token, record)
    return record
  }
}
