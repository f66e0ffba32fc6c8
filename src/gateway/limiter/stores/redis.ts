// The shared store: window counters and bans in Redis, so every gateway process enforces one limit.
// One implementation for an ioredis client of any topology (standalone, Sentinel, Cluster): all of a
// key's state carries one hash tag ({id}) and so lives in one slot, and a request costs one EVALSHA
// of lua/sliding-window.lua (ioredis `defineCommand` sends it by SHA and reloads it on NOSCRIPT).
// Bans are per-key `rl:{id}:ban` keys, not a global set (which Cluster could not update atomically
// with the key's slot); listing them SCANs every master for that pattern. Every gateway caches a
// ban until it ends, so a lift is published on BAN_LIFT_CHANNEL (classic pub/sub, which a Cluster
// broadcasts to every node: no hash tag needed) and each gateway's subscriber drops its cache entry.
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { Cluster, type Redis, type Result } from 'ioredis'
import { LRUCache } from 'lru-cache'
import type { BanPolicy, Limits } from '../../config/types.js'
import { DAY_WINDOW, MINUTE_WINDOW } from '../arithmetic.js'
import type { BanEntry, ConsumeOutcome, ConsumeResult, LimiterStore } from '../store.js'

export const KEY_PREFIX = 'rl:'
export const BAN_LIFT_CHANNEL = 'petstore:ban-lifted'
export const DEFAULT_KEY_CACHE_SIZE = 10_000
const SCAN_COUNT = 1000
const COMMAND = 'petstoreSlidingWindow'
const OUTCOMES: readonly ConsumeOutcome[] = ['ok', 'rate_limited', 'key_banned', 'ban_started']
const WINDOW_ARGS = [MINUTE_WINDOW.bucketMs, MINUTE_WINDOW.slots, DAY_WINDOW.bucketMs, DAY_WINDOW.slots] as const

export const SLIDING_WINDOW_LUA = readFileSync(new URL('../lua/sliding-window.lua', import.meta.url), 'utf8')
export const SLIDING_WINDOW_SHA = createHash('sha1').update(SLIDING_WINDOW_LUA).digest('hex')

type ScriptReply = [number, number, number, number, number, number, number, number, number]
type ScriptArg = string | number

declare module 'ioredis' {
  interface RedisCommander<Context> {
    petstoreSlidingWindow: (...args: ScriptArg[]) => Result<ScriptReply, Context>
  }
}

/** CRC16/XMODEM, Redis Cluster's key → slot hash. */
function crc16 (text: string): number {
  let crc = 0
  for (const byte of Buffer.from(text)) {
    crc ^= byte << 8
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
  }
  return crc
}

/** The Cluster slot of a key (its hash tag when it has a non-empty one). */
export function keySlot (key: string): number {
  const open = key.indexOf('{')
  const close = open < 0 ? -1 : key.indexOf('}', open + 1)
  return crc16(close > open + 1 ? key.slice(open + 1, close) : key) % 16384
}

/** Every Redis key of one limiter id: one hash tag, one slot. */
export function redisKeys (id: string): [minute: string, day: string, ban: string, escalation: string, rejections: string] {
  const base = `${KEY_PREFIX}{${id}}:`
  return [`${base}m`, `${base}d`, `${base}ban`, `${base}esc`, `${base}rej`]
}

export interface RedisStoreOptions {
  /**
   * TEST ONLY: a clock passed to the script instead of Redis TIME, so tests can step across window
   * edges without sleeping. Production never sets it: Redis TIME keeps skewed gateways in agreement.
   */
  clock?: () => number
}

export function createRedisStore (client: Redis | Cluster, opts: RedisStoreOptions = {}): LimiterStore {
  client.defineCommand(COMMAND, { numberOfKeys: 5, lua: SLIDING_WINDOW_LUA })
  const isCluster = client instanceof Cluster
  const keyCache = new LRUCache<string, ReturnType<typeof redisKeys>>({ max: DEFAULT_KEY_CACHE_SIZE })
  const clock = opts.clock
  let subscriber: Redis | Cluster | undefined

  function keysOf (id: string): ReturnType<typeof redisKeys> {
    let keys = keyCache.get(id)
    if (keys === undefined) {
      keys = redisKeys(id)
      keyCache.set(id, keys)
    }
    return keys
  }

  async function call (mode: 'c' | 'p', id: string, limits: Limits, ban: BanPolicy | null, banCheck: boolean): Promise<ConsumeResult> {
    const [m, d, b, e, r] = keysOf(id)
    const reply = await client.petstoreSlidingWindow(m, d, b, e, r, mode, limits.perMinute, limits.perDay,
      ban?.threshold ?? (banCheck ? 1 : 0), (ban?.windowSeconds ?? 0) * 1000, (ban?.durationSeconds ?? 0) * 1000,
      (ban?.maxDurationSeconds ?? 0) * 1000, clock === undefined ? '' : clock(), ...WINDOW_ARGS)
    return {
      outcome: OUTCOMES[reply[0]] ?? 'rate_limited',
      now: reply[1],
      minute: { count: reply[2], resetAt: reply[3], retryAt: reply[4] },
      day: { count: reply[5], resetAt: reply[6], retryAt: reply[7] },
      bannedUntil: reply[8]
    }
  }

  async function storeNow (): Promise<number> {
    if (clock !== undefined) return clock()
    const [seconds, micros] = await client.time()
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
  }

  async function scanMasters (match: string): Promise<string[]> {
    const nodes: Redis[] = isCluster ? (client as Cluster).nodes('master') : [client as Redis]
    const found: string[] = []
    await Promise.all(nodes.map(async (node) => {
      let cursor = '0'
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', match, 'COUNT', SCAN_COUNT)
        cursor = next
        found.push(...keys)
      } while (cursor !== '0')
    }))
    return found
  }

  return {
    kind: isCluster ? 'cluster' : 'redis',
    consume: (id, limits, ban) => call('c', id, limits, ban, false),
    peek: (id, limits) => call('p', id, limits, null, true),
    async listBans () {
      const keys = await scanMasters(`${KEY_PREFIX}{*}:ban`)
      const [values, t] = await Promise.all([Promise.all(keys.map((key) => client.get(key))), storeNow()])
      const bans: BanEntry[] = []
      keys.forEach((key, i) => {
        const until = Number(values[i] ?? 0)
        if (until > t) bans.push({ id: key.slice(KEY_PREFIX.length + 1, -'}:ban'.length), until })
      })
      return bans
    },
    async liftBan (id) {
      const [, , ban, escalation, rejections] = keysOf(id)
      const [until, t] = await Promise.all([client.get(ban), storeNow()])
      await client.del(ban, escalation, rejections)
      await client.publish(BAN_LIFT_CHANNEL, id)
      return Number(until ?? 0) > t
    },
    async escalationLevel (id) {
      // The level key lives as long as the ban key (24 h past the ban's end), the script's memory.
      const level = await client.get(keysOf(id)[3])
      return level === null ? -1 : Number(level)
    },
    async reset (id) {
      // One hash tag: a multi-key DEL is one slot, fine on a Cluster.
      const deleted = await client.del(...keysOf(id))
      await client.publish(BAN_LIFT_CHANNEL, id)
      return deleted > 0
    },
    watchBanLifts (onLift) {
      // A connection of its own (a subscribed connection runs no other command), queueing its
      // SUBSCRIBE until it connects; ioredis resubscribes after every reconnect. Lifts published
      // while it was away are lost, so each (re)connection or topology change forgets every cached ban.
      const sub = client instanceof Cluster
        ? client.duplicate([], { enableOfflineQueue: true })
        : client.duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: null })
      subscriber = sub
      sub.on('error', () => { /* the main client reports connection errors */ })
      sub.on('message', (channel: string, id: string) => { if (channel === BAN_LIFT_CHANNEL) onLift(id) })
      const forgetAll = (): void => { onLift(undefined) }
      sub.on('ready', forgetAll)
      if (sub instanceof Cluster) {
        sub.on('+node', forgetAll)
        sub.on('-node', forgetAll)
      }
      sub.subscribe(BAN_LIFT_CHANNEL).catch(() => { /* retried on reconnect */ })
    },
    async ping () {
      await client.ping()
    },
    ...(isCluster
      ? { shardOf: (id: string) => (client as Cluster).slots[keySlot(keysOf(id)[0])]?.[0] ?? '' }
      : {}),
    async close () {
      subscriber?.disconnect()
      try {
        await client.quit()
      } catch {
        client.disconnect()
      }
    }
  }
}
