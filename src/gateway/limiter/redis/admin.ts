// Bans and windows as ops see them (admin API, CLI), on the Redis path. Bans live in each id's hash
// (grant.lua writes them atomically with its windows); an index of bans in force (`rl:{#bans}`, a
// sorted set by end) is written when a process learns of a new ban, so listing them reads the
// bans, never a SCAN of every key. Each entry is checked against the id's hash, so a stale index
// entry is never shown. Lifts and resets are published (classic pub/sub, which a Cluster
// broadcasts), so every process drops its cached ban and what it held for the id.
import { Cluster, type Redis } from 'ioredis'
import type { RedisClient } from '../../redis/connection.js'
import { dayKey, limiterKey } from '../../redis/keys.js'
import type { BanEntry, StoreAdmin } from '../store.js'

export const BAN_LIFT_CHANNEL = 'petstore:ban-lifted'
export const BAN_INDEX_KEY = 'rl:{#bans}'
/** How long past a ban's end its level is remembered for escalation (grant.lua's ESCALATION_MS). */
const ESCALATION_MEMORY_MS = 86_400_000

export interface RedisAdmin extends StoreAdmin {
  /** A ban started (this process learnt it from a reply): indexed for listing. */
  noteBan: (id: string, until: number) => void
  close: () => void
}

/** grant.lua's ban fields of an id: b its end, e the last ban's end, l its level. */
const BAN_FIELDS = ['b', 'e', 'l'] as const

function parseBan (fields: Array<string | null>): { until: number, lastEnd: number, level: number } | undefined {
  const [until, lastEnd, level] = fields
  return until === null || until === undefined ? undefined : { until: Number(until), lastEnd: Number(lastEnd ?? 0), level: Number(level ?? -1) }
}

/** `bounded` wraps each call in the admin budget (a paused Redis fails the call, never hangs it). */
export function createRedisAdmin (client: RedisClient, bounded: <T>(call: Promise<T>) => Promise<T>): RedisAdmin {
  let subscriber: RedisClient | undefined

  async function redisNow (): Promise<number> {
    const [seconds, micros] = await client.time()
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
  }

  async function lifted (id: string): Promise<void> {
    await client.zrem(BAN_INDEX_KEY, id)
    await client.publish(BAN_LIFT_CHANNEL, id)
  }

  return {
    noteBan (id, until) {
      client.zadd(BAN_INDEX_KEY, until, id).catch(() => { /* listed from the next ban a process learns */ })
    },
    listBans: () => bounded((async () => {
      const now = await redisNow()
      await client.zremrangebyscore(BAN_INDEX_KEY, '-inf', now)
      const ids = await client.zrangebyscore(BAN_INDEX_KEY, now, '+inf')
      const fields = await Promise.all(ids.map((id) => client.hmget(limiterKey(id), ...BAN_FIELDS)))
      const bans: BanEntry[] = []
      ids.forEach((id, i) => {
        const ban = parseBan(fields[i] ?? [])
        if (ban !== undefined && ban.until > now) bans.push({ id, until: ban.until })
      })
      return bans
    })()),
    liftBan: (id) => bounded((async () => {
      const key = limiterKey(id)
      const [fields, now] = await Promise.all([client.hmget(key, ...BAN_FIELDS), redisNow()])
      await client.hdel(key, 'b', 'e', 'l', 'k')
      await lifted(id)
      return (parseBan(fields)?.until ?? 0) > now
    })()),
    escalationLevel: (id) => bounded((async () => {
      const [fields, now] = await Promise.all([client.hmget(limiterKey(id), ...BAN_FIELDS), redisNow()])
      const ban = parseBan(fields)
      return ban === undefined || ban.lastEnd + ESCALATION_MEMORY_MS <= now ? -1 : ban.level
    })()),
    reset: (id) => bounded((async () => {
      const deleted = await client.del(limiterKey(id), dayKey(id))
      await lifted(id)
      return deleted > 0
    })()),
    watchLifts (onLift) {
      // A connection of its own (a subscribed connection runs no other command), which queues its
      // SUBSCRIBE until it connects; lifts published while it was away are lost, so each
      // (re)connection or topology change forgets every cached ban.
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
      ;(sub as Redis).subscribe(BAN_LIFT_CHANNEL).catch(() => { /* retried on reconnect */ })
    },
    close () {
      subscriber?.disconnect()
    }
  }
}
