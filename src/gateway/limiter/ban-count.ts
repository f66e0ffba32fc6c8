// The number of bans in force in the shared store, for the gateway_banned_keys gauge. Counting them
// is a store read (Redis: the bans index, each entry checked), so it is done in the background — at
// start, every DEFAULT_BAN_COUNT_REFRESH_MS, and soon after this process starts, lifts or resets a
// ban — and a scrape reads the last count without touching Redis.
import type { BanEntry } from './store.js'

/** How old the count may get (Prometheus's default scrape interval in deploy/prometheus). */
export const DEFAULT_BAN_COUNT_REFRESH_MS = 15_000

export function createBanCount (listBans: () => Promise<BanEntry[]>, refreshMs = DEFAULT_BAN_COUNT_REFRESH_MS) {
  let value: number | undefined
  let running = false
  let again = false
  let closed = false

  function refresh (): void {
    again = running // asked while counting: once more after
    if (closed || running) return
    running = true
    listBans().then((bans) => { value = bans.length }, () => { /* the store is unreachable: keep the last count */ }).finally(() => {
      running = false
      if (again) refresh()
    })
  }

  const timer = setInterval(refresh, refreshMs)
  timer.unref()
  refresh()
  return {
    /** Bans at the last count that succeeded; undefined before the first. */
    value: (): number | undefined => value,
    /** Counts again as soon as the count under way (if any) ends. */
    refreshSoon: refresh,
    close () {
      closed = true
      clearInterval(timer)
    }
  }
}
