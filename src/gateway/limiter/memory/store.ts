// The in-process store: the same windows, costs, month, bans and escalation as the Redis script,
// for one process (the default without REDIS_URL). Time comes from an injected clock so tests and
// the bench need no sleeping.
//
// Two bounded tables, so anonymous traffic can never push a key's state out: one for keys (their
// windows, bans and ban escalation) and one for anonymous clients (`ip:` ids). Only configured keys
// reach the first, so its size follows the key count; anyone can mint new addresses, so the second
// has its own bound (ANONYMOUS_STATE_MAX) and, when full, evicts its least recently seen client —
// never a key. An evicted client starts a fresh anonymous window, which is nothing an attacker able
// to cycle through that many addresses (or IPv6 prefixes) would not get from unseen ones anyway.
import { LRUCache } from 'lru-cache'
import { ANONYMOUS_ID_PREFIX } from '../../edge/client-address.js'
import { addToWindow, calendarMonth, DAY_WINDOW, MINUTE_WINDOW, newRing, readWindow, type Ring, type WindowReading, type WindowSpec } from '../arithmetic.js'
import { IN_PROCESS_HEALTH } from '../store-health.js'
import type { Ask, BanEntry, ConsumeOutcome, ConsumeResult, LimiterStore, WindowState } from '../store.js'

/** Key states kept; only configured keys create one, so this bounds memory rather than caps traffic. */
export const DEFAULT_MEMORY_MAX_KEYS = 100_000
/** Anonymous client states kept (ANONYMOUS_STATE_MAX); the least recently seen client is evicted beyond it. */
export const DEFAULT_ANONYMOUS_STATE_MAX = 100_000
/** Longest a key state matters after its last request: the day window, or a ban's escalation memory. */
export const DEFAULT_MEMORY_IDLE_MS = 2 * 86_400_000
const ESCALATION_MEMORY_MS = 86_400_000
const MAX_LEVEL = 40

interface KeyState {
  readonly minute: Ring
  readonly day: Ring
  /** Units of the calendar month `monthIndex` (counted only while a month limit applies). */
  monthIndex: number
  monthCount: number
  banUntil: number
  level: number
  levelUntil: number
  rejections: number[]
}

export interface MemoryStoreOptions {
  /** The gateway clock, Unix ms (default Date.now). */
  now?: () => number
  /** Key (consumer) states kept. */
  maxKeys?: number
  /** Anonymous (`ip:`) states kept, in a table of their own. */
  maxAnonymousStates?: number
}

function emptyReading (): WindowReading {
  return { count: 0, resetAt: 0, retryAt: 0 }
}

const DESCRIPTION = Object.freeze({ kind: 'memory' as const, nodes: [] })

export function createMemoryStore (opts: MemoryStoreOptions = {}): LimiterStore {
  const now = opts.now ?? Date.now
  const table = (max: number): LRUCache<string, KeyState> =>
    new LRUCache<string, KeyState>({ max, ttl: DEFAULT_MEMORY_IDLE_MS, updateAgeOnGet: true, perf: { now } })
  const keyed = table(opts.maxKeys ?? DEFAULT_MEMORY_MAX_KEYS)
  const anonymous = table(opts.maxAnonymousStates ?? DEFAULT_ANONYMOUS_STATE_MAX)

  function tableOf (id: string): LRUCache<string, KeyState> {
    return id.startsWith(ANONYMOUS_ID_PREFIX) ? anonymous : keyed
  }

  function stateOf (id: string): KeyState {
    const states = tableOf(id)
    let state = states.get(id)
    if (state === undefined) {
      state = { minute: newRing(MINUTE_WINDOW), day: newRing(DAY_WINDOW), monthIndex: -1, monthCount: 0, banUntil: 0, level: -1, levelUntil: 0, rejections: [] }
      states.set(id, state)
    }
    return state
  }

  /** The month as the contract reports it: units used, reset at the month's end, retry then when it refuses. */
  function monthReading (state: KeyState | undefined, t: number, ask: Ask): WindowState {
    const month = calendarMonth(t)
    const count = state !== undefined && state.monthIndex === month.index ? state.monthCount : 0
    return { count, resetAt: month.end, retryAt: !ask.overage && count + ask.cost > ask.monthLimit ? month.end : 0 }
  }

  function result (outcome: ConsumeOutcome, t: number, minute: WindowReading, day: WindowReading, bannedUntil: number, month: WindowState | undefined): ConsumeResult {
    return month === undefined ? { outcome, now: t, minute, day, bannedUntil } : { outcome, now: t, minute, day, month, bannedUntil }
  }

  function run (id: string, ask: Ask, write: boolean): ConsumeResult {
    const { limits, ban, cost, monthLimit } = ask
    const t = now()
    const state = write ? stateOf(id) : tableOf(id).get(id)
    const month = monthLimit > 0 ? monthReading(state, t, ask) : undefined
    if (state === undefined) {
      return result('ok', t, readWindow(newRing(MINUTE_WINDOW), MINUTE_WINDOW, t, limits.perMinute, emptyReading(), cost),
        readWindow(newRing(DAY_WINDOW), DAY_WINDOW, t, limits.perDay, emptyReading(), cost), 0, month)
    }
    if (write && ban !== null && state.banUntil > t) {
      return result('key_banned', t, emptyReading(), emptyReading(), state.banUntil, undefined)
    }
    const minute = readWindow(state.minute, MINUTE_WINDOW, t, limits.perMinute, emptyReading(), cost)
    const day = readWindow(state.day, DAY_WINDOW, t, limits.perDay, emptyReading(), cost)
    if (!write && state.banUntil > t) return result('key_banned', t, minute, day, state.banUntil, month)
    if (minute.retryAt === 0 && day.retryAt === 0 && (month === undefined || month.retryAt === 0)) {
      if (write) {
        admit(state.minute, MINUTE_WINDOW, t, minute, cost)
        admit(state.day, DAY_WINDOW, t, day, cost)
        if (month !== undefined) {
          state.monthIndex = calendarMonth(t).index
          state.monthCount = month.count + cost
        }
      }
      return result('ok', t, minute, day, 0, month === undefined ? undefined : { ...month, count: month.count + (write ? cost : 0) })
    }
    // A month out of quota refuses, and such a refusal is no abuse: no 429 counted toward a ban.
    if (!write || ban === null || (month !== undefined && month.retryAt > 0)) return result('rate_limited', t, minute, day, 0, month)
    state.rejections.push(t)
    if (state.rejections.length > ban.threshold) {
      state.rejections.splice(0, state.rejections.length - ban.threshold - 1)
      if (t - (state.rejections[0] ?? t) < ban.windowSeconds * 1000) {
        const level = state.levelUntil > t ? state.level + 1 : 0
        const maxMs = ban.maxDurationSeconds * 1000
        const durationMs = level < MAX_LEVEL ? Math.min(ban.durationSeconds * 1000 * 2 ** level, maxMs) : maxMs
        state.banUntil = t + durationMs
        state.level = level
        state.levelUntil = state.banUntil + ESCALATION_MEMORY_MS
        state.rejections = []
        return result('ban_started', t, minute, day, state.banUntil, month)
      }
    }
    return result('rate_limited', t, minute, day, 0, month)
  }

  return {
    describe: () => DESCRIPTION,
    consume: async (id, ask) => run(id, ask, true),
    peek: async (id, ask) => run(id, { ...ask, ban: null }, false),
    admin: {
      async listBans () {
        const t = now()
        const bans: BanEntry[] = []
        for (const states of [keyed, anonymous]) {
          for (const [id, state] of states.entries()) if (state.banUntil > t) bans.push({ id, until: state.banUntil })
        }
        return bans
      },
      async liftBan (id) {
        const state = tableOf(id).get(id)
        if (state === undefined) return false
        const wasBanned = state.banUntil > now()
        state.banUntil = 0
        state.level = -1
        state.levelUntil = 0
        state.rejections = []
        return wasBanned
      },
      async escalationLevel (id) {
        const state = tableOf(id).get(id)
        return state !== undefined && state.levelUntil > now() ? state.level : -1
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
function admit (ring: Ring, spec: WindowSpec, t: number, reading: WindowReading, units: number): void {
  addToWindow(ring, spec, t, units)
  if (reading.count === 0) reading.resetAt = (Math.floor(t / spec.bucketMs) + spec.slots) * spec.bucketMs
  reading.count += units
}
