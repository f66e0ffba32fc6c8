// The limiter store contract: the one seam between the limiter (plugin, headers, ban cache) and
// where window counters and bans live. Every store does all of it — the in-process store
// (stores/memory.ts), the Redis store of any topology (stores/redis.ts) and the wrappers around it
// (stores/resilient.ts, stores/leases.ts) — so a wrapper implements every member and the type
// checker names the wrappers a new member must reach. What one store adds (leases, breaker and
// readiness) is in that store's own type.
import type { BanPolicy, Limits } from '../config/types.js'

export type ConsumeOutcome = 'ok' | 'rate_limited' | 'key_banned' | 'ban_started'

export interface WindowState {
  /** Requests counted in the window, including this one when admitted. */
  readonly count: number
  /** Unix ms when the window next frees capacity (now + window when empty). */
  readonly resetAt: number
  /** Unix ms when a full window admits one more; 0 when not full. */
  readonly retryAt: number
}

export interface ConsumeResult {
  readonly outcome: ConsumeOutcome
  /** The store's clock (Redis TIME for Redis stores), Unix ms. */
  readonly now: number
  readonly minute: WindowState
  readonly day: WindowState
  /** Unix ms when the key's ban ends, on `key_banned` and `ban_started`; 0 otherwise. */
  readonly bannedUntil: number
  /**
   * How it was decided when not by a call of its own to the store: from this process's lease (no
   * Redis call), in one script call with the other decisions of its turn, or by the STORE_ON_ERROR
   * policy while Redis did not answer. For traces (the limiter span's `source`) only.
   */
  readonly via?: 'lease' | 'batch' | 'fallback'
}

export interface BanEntry {
  readonly id: string
  /** Unix ms when the ban ends. */
  readonly until: number
}

/** Where a store keeps its state, for the start-up log and readiness: never credentials. */
export interface StoreDescription {
  readonly kind: 'memory' | 'redis' | 'sentinel' | 'cluster'
  /** `host:port` of each configured node or seed ([] for the in-process store). */
  readonly nodes: readonly string[]
}

export interface LimiterStore {
  readonly kind: StoreDescription['kind']
  /** Kind and nodes, for the start-up log line and /readyz. */
  describe: () => StoreDescription
  /**
   * Atomically: if `id` is banned, answer `key_banned` without counting; else count the request in
   * both windows if both have room (`ok`), or reject without consuming quota (`rate_limited`), which
   * under `ban` counts a 429 and may start a ban (`ban_started`). `ban` null: never banned (anonymous).
   */
  consume: (id: string, limits: Limits, ban: BanPolicy | null) => Promise<ConsumeResult>
  /** What `consume` would answer now, changing nothing (no count, no 429 recorded); a banned key's windows are read too. */
  peek: (id: string, limits: Limits) => Promise<ConsumeResult>
  /** Bans in force now, in every process's view (the shared store), any order. */
  listBans: () => Promise<BanEntry[]>
  /** Ends `id`'s ban and forgets its recent 429s and escalation (a clean slate). True if a ban was in force. */
  liftBan: (id: string) => Promise<boolean>
  /** Level of `id`'s latest ban while remembered for escalation (24 h after it ends): 0 = base duration, n = base × 2^n; -1 none. */
  escalationLevel: (id: string) => Promise<number>
  /** Forgets both windows, the ban, recent 429s and escalation of `id`; true if anything was stored. */
  reset: (id: string) => Promise<boolean>
  /**
   * Calls `onLift(id)` whenever any process lifts or resets `id`, so each drops its cached ban;
   * `onLift(undefined)` when lifts may have been missed (drop every cached ban). A store only one
   * process uses never calls it: its lifts go through the plugin that holds the cache.
   */
  watchBanLifts: (onLift: (id: string | undefined) => void) => void
  /** Resolves when the store's own state answers (a real round trip to Redis); rejects with the reason otherwise. */
  ping: () => Promise<void>
  /** Releases connections and timers. */
  close: () => Promise<void>
}
