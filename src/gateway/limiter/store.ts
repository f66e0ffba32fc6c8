// The limiter store contract: the one seam between the limiter (plugin, headers, ban cache) and
// where window counters and bans live. Two implementations share one algorithm (arithmetic.ts and
// its Lua twin): in-process, and Redis of any topology (standalone, Sentinel, Cluster). A store is a
// plain object, so wrappers implement the same interface around another: leases (hot consumers
// admitted locally, stores/leases.ts) and resilience (timeouts, circuit breaker, fallback).
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

/** `ok`: answering from its own state; `fallback`: STORE_ON_ERROR=local answers while Redis fails; `down`: not answering. */
export type StoreState = 'ok' | 'fallback' | 'down'

export interface LimiterStore {
  /** `memory`, `redis`, `sentinel` or `cluster`: for logs and readiness output. */
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
  /**
   * Level of `id`'s latest ban while the store still remembers it for escalation (24 h after it
   * ends): 0 = base duration, n = base × 2^n; -1 when none is remembered. Admin reads only.
   */
  escalationLevel: (id: string) => Promise<number>
  /**
   * Forgets everything about `id` — both windows, its ban, recent 429s and escalation (a support
   * action after an incident); shared stores tell every process to drop a cached ban, as a lift
   * does. True if anything was stored.
   */
  reset: (id: string) => Promise<boolean>
  /** Resolves when the store's own state answers (a real round trip to Redis); rejects with the reason otherwise. */
  ping: () => Promise<void>
  /**
   * An admission this process may answer without a round trip (a lease: stores/leases.ts), or
   * undefined: ask `consume`. Never rejects, never counts a 429. Absent: every request asks `consume`.
   */
  tryLocal?: (id: string, limits: Limits) => ConsumeResult | undefined
  /** Releases connections and timers. */
  close: () => Promise<void>
  /**
   * Shared stores: calls `onLift(id)` whenever any process lifts `id`'s ban, so every process drops
   * it from its ban cache; `onLift(undefined)` when lifts may have been missed (the subscription
   * reconnected): drop every cached ban. Absent on a store that only one process uses.
   */
  watchBanLifts?: (onLift: (id: string | undefined) => void) => void
  /**
   * Which independent part of the store holds `id` (a Cluster master, as `host:port`), so a wrapper can
   * break the circuit for a lost node only; absent or '' : one part.
   */
  shardOf?: (id: string) => string
  /**
   * Readiness: contacts the store for real and resolves with its state — `ok`, or `fallback` when it
   * failed and the STORE_ON_ERROR policy still answers; rejects when no request can be answered
   * (`down`). Absent: `ping` decides (ok or down).
   */
  probe?: () => Promise<StoreState>
  /** Redis `maxmemory-policy`, or undefined where CONFIG GET is not allowed (or no Redis). */
  maxmemoryPolicy?: () => Promise<string | undefined>
  /** A resilient wrapper's failures so far (timeouts, connection errors); absent: nothing counted. */
  errors?: () => number
  /** A resilient wrapper's breaker: true while it is open and the fallback policy answers. */
  fallbackActive?: () => boolean
}
