// Bans cached in this process until they end, so a banned consumer's flood costs the store nothing.
// Entries are kept in this process's clock (the store's "until" minus its "now" plus ours), so a
// skewed process still holds a ban exactly as long as it lasts; a lift anywhere drops the entry
// through the store's watchBanLifts. A ban the STORE_ON_ERROR fallback decided (Redis did not
// answer) is provisional: it is kept only while the fallback still answers, so once Redis is back
// the consumer's next request is decided there (a local ban must not outlive the fault).
import { LRUCache } from 'lru-cache'
import type { ConsumeResult } from './store.js'

/** Bans cached per process (each until its end); beyond this, the least recent is asked again. */
export const DEFAULT_BAN_CACHE_SIZE = 10_000

export interface BanCache {
  /** Unix ms (this process's clock) when `id`'s cached ban ends, or undefined: not known banned. */
  get: (id: string) => number | undefined
  /** Remembers the ban a store answer carries (none: nothing to remember); `provisional`: the fallback decided it. */
  remember: (id: string, result: ConsumeResult, provisional?: boolean) => void
  /** Forgets `id`, or every ban (undefined: lifts may have been missed). */
  forget: (id: string | undefined) => void
}

interface Entry {
  readonly until: number
  readonly provisional: boolean
}

/** `fallbackAnswers`: true while the fallback still answers (provisional bans are kept only then). */
export function createBanCache (now: () => number, max = DEFAULT_BAN_CACHE_SIZE, fallbackAnswers: () => boolean = () => true): BanCache {
  const bans = new LRUCache<string, Entry>({ max })
  return {
    get (id) {
      const entry = bans.get(id)
      if (entry === undefined) return undefined
      if (entry.until > now() && (!entry.provisional || fallbackAnswers())) return entry.until
      bans.delete(id)
      return undefined
    },
    remember (id, result, provisional = false) {
      const left = result.bannedUntil - result.now
      if (left > 0) bans.set(id, { until: now() + left, provisional })
    },
    forget (id) {
      if (id === undefined) bans.clear()
      else bans.delete(id)
    }
  }
}
