// Bans cached in this process until they end, so a banned consumer's flood costs the store nothing.
// Kept in this process's clock (the store's "until" minus its "now" plus ours), so a skewed process
// holds a ban exactly as long as it lasts; a lift anywhere drops it (the store's watchLifts).
import { LRUCache } from 'lru-cache'
import type { ConsumeResult } from './store.js'

/** Bans cached per process (each until its end); beyond this, the least recent is asked again. */
export const DEFAULT_BAN_CACHE_SIZE = 10_000

export function createBanCache (now: () => number, max = DEFAULT_BAN_CACHE_SIZE) {
  const bans = new LRUCache<string, number>({ max })
  return {
    /** Unix ms (this process's clock) when `id`'s cached ban ends, or undefined: not known banned. */
    get (id: string): number | undefined {
      const until = bans.get(id)
      if (until === undefined) return undefined
      if (until > now()) return until
      bans.delete(id)
      return undefined
    },
    /** Remembers the ban a store answer carries (none: nothing to remember). */
    remember (id: string, result: ConsumeResult) {
      const left = result.bannedUntil - result.now
      if (left > 0) bans.set(id, now() + left)
    },
    /** Forgets `id`, or every ban (undefined: lifts may have been missed). */
    forget (id: string | undefined) {
      if (id === undefined) bans.clear()
      else bans.delete(id)
    }
  }
}
