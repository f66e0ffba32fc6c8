// The limiter store contract: the one seam between the limiter (plugin, headers, ban cache) and
// where window counters and bans live. Two stores implement it: the in-process store
// (memory/store.ts, one process) and the Redis store (redis/store.ts, any number of processes).
import type { BanPolicy, Limits } from '../config/types.js'
import type { StoreHealth } from './store-health.js'

export type ConsumeOutcome = 'ok' | 'rate_limited' | 'key_banned' | 'ban_started'

/**
 * A window: units counted, including this request's when admitted; Unix ms when it next frees
 * capacity (now + window when empty); Unix ms when a full window has room for this request (0: not full).
 */
export interface WindowState { readonly count: number, readonly resetAt: number, readonly retryAt: number }

export interface ConsumeResult {
  readonly outcome: ConsumeOutcome
  /** The store's clock (Redis TIME for the Redis store), Unix ms. */
  readonly now: number
  readonly minute: WindowState
  readonly day: WindowState
  /** The calendar month (UTC), when a month limit applies. */
  readonly month?: WindowState
  /** Unix ms when the id's ban ends, on `key_banned` and `ban_started`; 0 otherwise. */
  readonly bannedUntil: number
  /** Not by a store call of its own: units this process held (`grant`), or STORE_ON_ERROR (`fallback`). */
  readonly via?: 'grant' | 'fallback'
  /** On `fallback` under STORE_ON_ERROR=local or strict: what admitted it, the reserve (within the limit) or the outage allowance (over it by at most the allowance). */
  readonly outageSource?: 'reserve' | 'allowance'
}

/** A ban in force: the id, and Unix ms when it ends. */
export interface BanEntry { readonly id: string, readonly until: number }

/** Where a store keeps its state (`host:port` of each node or seed; [] in process), never credentials. */
export interface StoreDescription { readonly kind: 'memory' | 'redis' | 'sentinel' | 'cluster', readonly nodes: readonly string[] }

/**
 * What the limiter asks of one id: its limits, its ban policy (null: never banned), the units this
 * request spends (its route's cost), units per calendar month (UTC; 0: none), and whether the month
 * is counted but never refuses (overage allowed, or a quota only rehearsed by a shadow).
 */
export interface Ask { readonly limits: Limits, readonly ban: BanPolicy | null, readonly cost: number, readonly monthLimit: number, readonly overage: boolean }

/** Ops on bans and windows (admin API, CLI): never answered from anything but the store itself. */
export interface StoreAdmin {
  /** Bans in force now, in every process's view. */
  listBans: () => Promise<BanEntry[]>
  /** Ends `id`'s ban and forgets its recent 429s and escalation. True if a ban was in force. */
  liftBan: (id: string) => Promise<boolean>
  /** Level of `id`'s latest ban while remembered (24 h after it ends): 0 base, n base × 2^n; -1 none. */
  escalationLevel: (id: string) => Promise<number>
  /** Forgets every window, the ban and escalation of `id`; true if anything was stored. */
  reset: (id: string) => Promise<boolean>
  /** Calls `onLift(id)` when any process lifts or resets `id`; `onLift(undefined)` when lifts may have been missed. */
  watchLifts: (onLift: (id: string | undefined) => void) => void
}

export interface LimiterStore {
  readonly describe: () => StoreDescription
  /**
   * Atomically: a banned id is `key_banned`, not counted; else counted in every window if each has
   * room for its cost (`ok`), or not at all (`rate_limited`: a 429 counted toward a ban, `ban_started`).
   */
  readonly consume: (id: string, ask: Ask) => Promise<ConsumeResult>
  /** What `consume` would find now, changing nothing. */
  readonly peek: (id: string, ask: Ask) => Promise<ConsumeResult>
  readonly admin: StoreAdmin
  readonly health: StoreHealth
  /** Releases connections and timers. */
  readonly close: () => Promise<void>
}

/** An ask of `limits`; a month is counted when a quota is enforced, or rehearsed by a shadow (never refusing). */
export function askOf (limits: Limits, ban: BanPolicy | null = null, cost = 1): Ask {
  const monthLimit = limits.perMonth ?? limits.shadow?.perMonth ?? 0
  return { limits, ban, cost, monthLimit, overage: limits.perMonth === undefined || limits.overage === true }
}
