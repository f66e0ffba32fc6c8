// The in-process store: the same windows, costs, month, bans and escalation as the Redis script, for one process (the
// default without REDIS_URL). Time comes from an injected clock so tests and the bench need no sleeping. Two bounded
// tables, so anonymous traffic can never push a key's state out: keys (only configured ones reach it, so its size
// follows the key count) and anonymous clients (`ip:` ids, ANONYMOUS_STATE_MAX, second-chance eviction: a client not seen
// since it was placed goes before one that was, oldest placed first — see src/shared/second-chance-map.ts; an evicted
// client starts a fresh window, which an attacker cycling addresses would get from unseen ones anyway). A request's
// lookup is one Map get, a mark and the state's `seenAt` written: no LRU list move, no clock read of its own; a state
// idle past DEFAULT_MEMORY_IDLE_MS reads as absent (and is dropped) at its next lookup.
import { SecondChanceMap } from '../../../shared/second-chance-map.js'
import { ANONYMOUS_ID_PREFIX } from '../../edge/client-address.js'
import { addToWindow, calendarMonth, DAY_WINDOW, MINUTE_WINDOW, newRing, readWindow, type Ring, type WindowReading, type WindowSpec } from '../arithmetic.js'
import { recordRejection } from '../ban-record.js'
import { IN_PROCESS_HEALTH } from '../store-health.js'
import type { Ask, BanEntry, ConsumeOutcome, ConsumeResult, LimiterStore, WindowState } from '../store.js'

/** Key states kept; only configured keys create one, so this bounds memory rather than caps traffic. */
export const DEFAULT_MEMORY_MAX_KEYS = 100_000
/** Anonymous client states kept (ANONYMOUS_STATE_MAX); beyond it, a client not seen since it was placed is evicted (second chance). */
export const DEFAULT_ANONYMOUS_STATE_MAX = 100_000
/** Longest a key state matters after its last request: the day window, or a ban's escalation memory. */
export const DEFAULT_MEMORY_IDLE_MS = 2 * 86_400_000
const ESCALATION_MEMORY_MS = 86_400_000
const MAX_LEVEL = 40

/** One id: its rings, its month's units (`monthIndex`: which month), its ban, escalation and recent 429s; when it was last looked up. */
interface KeyState {
  seenAt: number
  readonly minute: Ring
  readonly day: Ring
  monthIndex: number
  monthCount: number
  banUntil: number
  level: number
  levelUntil: number
  /** Recent 429s per bucket of the ban window: `bucketStart, count` pairs, oldest first (ban-record.ts). */
  rejections: number[]
}

/** The gateway clock (Unix ms, default Date.now); key states kept; anonymous (`ip:`) states kept, in a table of their own. */
export interface MemoryStoreOptions { now?: () => number, maxKeys?: number, maxAnonymousStates?: number }

const DESCRIPTION = Object.freeze({ kind: 'memory' as const, nodes: [] })
const NO_READING: WindowReading = Object.freeze({ count: 0, resetAt: 0, retryAt: 0 })

/**
 * The answer at `nowMs`. A function of the module, not a closure made in each decision: under tsx (how the sources ran
 * until 29 Nov) keepNames named every closure at its creation (`Object.defineProperty`), 1.3–1.7 µs of every request
 * when it was one (bench:profile).
 */
function resultAt (nowMs: number, outcome: ConsumeOutcome, minute: WindowReading, day: WindowReading, bannedUntil: number, month: WindowState | undefined): ConsumeResult {
  return month === undefined ? { outcome, now: nowMs, minute, day, bannedUntil } : { outcome, now: nowMs, minute, day, month, bannedUntil }
}

export function createMemoryStore (opts: MemoryStoreOptions = {}): LimiterStore {
  const now = opts.now ?? Date.now
  const keyed = new SecondChanceMap<string, KeyState>(opts.maxKeys ?? DEFAULT_MEMORY_MAX_KEYS)
  const anonymous = new SecondChanceMap<string, KeyState>(opts.maxAnonymousStates ?? DEFAULT_ANONYMOUS_STATE_MAX)
  const tableOf = (id: string): SecondChanceMap<string, KeyState> => id.startsWith(ANONYMOUS_ID_PREFIX) ? anonymous : keyed

  /** The id's state if it has one not idle past DEFAULT_MEMORY_IDLE_MS, its idle time renewed (an idle one is dropped). */
  function find (id: string, nowMs: number): KeyState | undefined {
    const table = tableOf(id)
    const state = table.get(id)
    if (state === undefined) return undefined
    if (nowMs - state.seenAt > DEFAULT_MEMORY_IDLE_MS) {
      table.delete(id)
      return undefined
    }
    state.seenAt = nowMs
    return state
  }

  /** The id's state, made the first time: one table lookup per request, a set only for a new (or idle) id. */
  function stateOf (id: string, nowMs: number): KeyState {
    let state = find(id, nowMs)
    if (state === undefined) {
      state = { seenAt: nowMs, minute: newRing(MINUTE_WINDOW), day: newRing(DAY_WINDOW), monthIndex: -1, monthCount: 0, banUntil: 0, level: -1, levelUntil: 0, rejections: [] }
      tableOf(id).set(id, state)
    }
    return state
  }

  /** Every state not idle, of both tables. */
  function * liveStates (nowMs: number): Generator<[string, KeyState]> {
    for (const table of [keyed, anonymous]) {
      for (const entry of table.entries()) if (nowMs - entry[1].seenAt <= DEFAULT_MEMORY_IDLE_MS) yield entry
    }
  }

  function run (id: string, ask: Ask, write: boolean): ConsumeResult {
    const { limits, ban, cost, monthLimit } = ask
    const nowMs = now()
    const state = write ? stateOf(id, nowMs) : find(id, nowMs)
    // The month: units used, reset at its end, retry then when it refuses.
    const calendar = monthLimit > 0 ? calendarMonth(nowMs) : undefined
    const used = calendar !== undefined && state?.monthIndex === calendar.index ? state.monthCount : 0
    const month = calendar === undefined ? undefined : { count: used, resetAt: calendar.end, retryAt: !ask.overage && used + cost > monthLimit ? calendar.end : 0 }
    if (write && ban !== null && state !== undefined && state.banUntil > nowMs) return resultAt(nowMs, 'key_banned', NO_READING, NO_READING, state.banUntil, undefined)
    const minute = readWindow(state?.minute ?? newRing(MINUTE_WINDOW), MINUTE_WINDOW, nowMs, limits.perMinute, cost)
    const day = readWindow(state?.day ?? newRing(DAY_WINDOW), DAY_WINDOW, nowMs, limits.perDay, cost)
    if (state === undefined) return resultAt(nowMs, 'ok', minute, day, 0, month)
    if (!write && state.banUntil > nowMs) return resultAt(nowMs, 'key_banned', minute, day, state.banUntil, month)
    if (minute.retryAt === 0 && day.retryAt === 0 && (month === undefined || month.retryAt === 0)) {
      if (write) {
        admit(state.minute, MINUTE_WINDOW, nowMs, minute, cost)
        admit(state.day, DAY_WINDOW, nowMs, day, cost)
        if (calendar !== undefined) {
          state.monthIndex = calendar.index
          state.monthCount = used + cost
        }
      }
      return resultAt(nowMs, 'ok', minute, day, 0, month === undefined ? undefined : { ...month, count: used + (write ? cost : 0) })
    }
    // A month out of quota refuses, and such a refusal is no abuse: no 429 counted toward a ban.
    if (!write || ban === null || (month !== undefined && month.retryAt > 0)) return resultAt(nowMs, 'rate_limited', minute, day, 0, month)
    if (recordRejection(state.rejections, nowMs, ban.windowSeconds * 1000) > ban.threshold) {
      const level = state.levelUntil > nowMs ? state.level + 1 : 0
      const maxMs = ban.maxDurationSeconds * 1000
      state.banUntil = nowMs + (level < MAX_LEVEL ? Math.min(ban.durationSeconds * 1000 * 2 ** level, maxMs) : maxMs)
      state.level = level
      state.levelUntil = state.banUntil + ESCALATION_MEMORY_MS
      state.rejections = []
      return resultAt(nowMs, 'ban_started', minute, day, state.banUntil, month)
    }
    return resultAt(nowMs, 'rate_limited', minute, day, 0, month)
  }

  return {
    describe: () => DESCRIPTION,
    consume: async (id, ask) => run(id, ask, true),
    peek: async (id, ask) => run(id, { ...ask, ban: null }, false),
    admin: {
      async listBans () {
        const nowMs = now()
        return [...liveStates(nowMs)].filter(([, state]) => state.banUntil > nowMs).map(([id, state]): BanEntry => ({ id, until: state.banUntil }))
      },
      async liftBan (id) {
        const nowMs = now()
        const state = find(id, nowMs)
        if (state === undefined) return false
        const wasBanned = state.banUntil > nowMs
        Object.assign(state, { banUntil: 0, level: -1, levelUntil: 0, rejections: [] })
        return wasBanned
      },
      async escalationLevel (id) {
        const nowMs = now()
        const state = find(id, nowMs)
        return state !== undefined && state.levelUntil > nowMs ? state.level : -1
      },
      reset: async (id) => tableOf(id).delete(id),
      // One process: its lifts go through the limiter plugin, which drops its own cached ban.
      watchLifts: () => {}
    },
    health: IN_PROCESS_HEALTH,
    close: async () => { keyed.clear(); anonymous.clear() }
  }
}

/** Counts the admitted units and updates the reading as the Lua script does. */
function admit (ring: Ring, spec: WindowSpec, nowMs: number, reading: WindowReading, units: number): void {
  addToWindow(ring, spec, nowMs, units)
  if (reading.count === 0) reading.resetAt = (Math.floor(nowMs / spec.bucketMs) + spec.slots) * spec.bucketMs
  reading.count += units
}
