// The in-process store: the same windows, bans and escalation as the Redis script, for one process
// (the default without REDIS_URL, and the fallback a later circuit breaker switches to). Time comes
// from an injected clock so tests and the bench need no sleeping.
//
// Two bounded tables, so anonymous traffic can never push a key's state out: one for keys (their
// windows, bans and ban escalation) and one for anonymous clients (`ip:` ids). Only configured keys
// reach the first, so its size follows the key count; anyone can mint new addresses, so the second
// has its own bound (ANONYMOUS_STATE_MAX) and, when full, evicts its least recently seen client —
// never a key. An evicted client starts a fresh anonymous window, which is nothing an attacker able
// to cycle through that many addresses (or IPv6 prefixes) would not get from unseen ones anyway.
import { LRUCache } from 'lru-cache'
import type { BanPolicy, Limits } from '../../config/types.js'
import { ANONYMOUS_ID_PREFIX } from '../../edge/client-address.js'
import { addToWindow, DAY_WINDOW, MINUTE_WINDOW, newRing, readWindow, type Ring, type WindowReading, type WindowSpec } from '../arithmetic.js'
import type { BanEntry, ConsumeOutcome, ConsumeResult, LimiterStore } from '../store.js'

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
      state = { minute: newRing(MINUTE_WINDOW), day: newRing(DAY_WINDOW), banUntil: 0, level: -1, levelUntil: 0, rejections: [] }
      states.set(id, state)
    }
    return state
  }

  function result (outcome: ConsumeOutcome, t: number, minute: WindowReading, day: WindowReading, bannedUntil: number): ConsumeResult {
    return { outcome, now: t, minute, day, bannedUntil }
  }

  function run (id: string, limits: Limits, ban: BanPolicy | null, write: boolean): ConsumeResult {
    const t = now()
    const state = write ? stateOf(id) : tableOf(id).get(id)
    if (state === undefined) {
      return result('ok', t, readWindow(newRing(MINUTE_WINDOW), MINUTE_WINDOW, t, limits.perMinute, emptyReading()),
        readWindow(newRing(DAY_WINDOW), DAY_WINDOW, t, limits.perDay, emptyReading()), 0)
    }
    if (write && ban !== null && state.banUntil > t) {
      return result('key_banned', t, emptyReading(), emptyReading(), state.banUntil)
    }
    const minute = readWindow(state.minute, MINUTE_WINDOW, t, limits.perMinute, emptyReading())
    const day = readWindow(state.day, DAY_WINDOW, t, limits.perDay, emptyReading())
    if (!write && state.banUntil > t) return result('key_banned', t, minute, day, state.banUntil)
    if (minute.count < limits.perMinute && day.count < limits.perDay) {
      if (write) {
        admit(state.minute, MINUTE_WINDOW, t, minute)
        admit(state.day, DAY_WINDOW, t, day)
      }
      return result('ok', t, minute, day, 0)
    }
    if (!write || ban === null) return result('rate_limited', t, minute, day, 0)
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
        return result('ban_started', t, minute, day, state.banUntil)
      }
    }
    return result('rate_limited', t, minute, day, 0)
  }

  return {
    kind: 'memory',
    describe: () => ({ kind: 'memory', nodes: [] }),
    consume: async (id, limits, ban) => run(id, limits, ban, true),
    peek: async (id, limits) => run(id, limits, null, false),
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
    watchBanLifts: () => {},
    ping: async () => {},
    close: async () => { keyed.clear(); anonymous.clear() }
  }
}

/** Counts the admitted request and updates the reading as the Lua script does. */
function admit (ring: Ring, spec: WindowSpec, t: number, reading: WindowReading): void {
  addToWindow(ring, spec, t)
  if (reading.count === 0) reading.resetAt = (Math.floor(t / spec.bucketMs) + spec.slots) * spec.bucketMs
  reading.count += 1
}
