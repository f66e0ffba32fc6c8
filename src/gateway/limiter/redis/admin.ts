// The limiter's state as ops read and change it (admin API, CLI), on a Redis connection of its own with its own
// budget: an admin read never queues behind decisions nor takes a shard down. Peeks run the grant script as a read.
// Bans live in each id's hash; an index of bans in force (`rl:{#bans}`, by end) is written when a process learns of
// one, so listing reads the bans, never a SCAN, each checked against its hash. Lifts and resets are published
// (pub/sub, broadcast by a Cluster), so every process drops its cached ban and what it held for the id.
import { Cluster, type Redis } from 'ioredis'
import { waitReady, type RedisClient } from '../../redis/connection.js'
import { dayKey, limiterKey } from '../../redis/keys.js'
import type { Ask, BanEntry } from '../store.js'
import { Account, consumeResult, entryOf } from './account.js'
import { ioredisPort } from './ioredis-port.js'
import { ESCALATION_MS, FIELD } from './layout.js'
import { withinBudget } from './outage.js'
import { GRANT, grantArgs, grantKeys, readGrantReply } from './scripts.js'

export const BAN_LIFT_CHANNEL = 'petstore:ban-lifted'
export const BAN_INDEX_KEY = 'rl:{#bans}'
/** Ops calls wait at most this long. */
export const DEFAULT_ADMIN_TIMEOUT_MS = 2_000
/** The ban fields of an id: its end, the last ban's end, its level. */
const BAN_FIELDS = [FIELD.banEnd, FIELD.lastBanEnd, FIELD.banLevel] as const

function parseBan (fields: Array<string | null>): { until: number, lastEnd: number, level: number } | undefined {
  const [until, lastEnd, level] = fields
  return until === null || until === undefined ? undefined : { until: Number(until), lastEnd: Number(lastEnd ?? 0), level: Number(level ?? -1) }
}

/** `client`: the decisions' connection (ops get a duplicate); `forget`: drops what this process holds for an id. */
export function createRedisAdmin (client: RedisClient, forget: (id: string) => void, timeoutMs = DEFAULT_ADMIN_TIMEOUT_MS) {
  const admin = client.duplicate() as RedisClient
  admin.on('error', () => { /* the decisions' connection reports connection errors */ })
  const port = ioredisPort(admin)
  let subscriber: RedisClient | undefined

  // The connection may still be coming up (a CLI's first call): wait for it within the same budget.
  const bounded = <T>(call: () => Promise<T>): Promise<T> => withinBudget(waitReady(admin, timeoutMs).then(call), timeoutMs)

  async function redisNow (): Promise<number> {
    const [seconds, micros] = await admin.time()
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
  }

  async function lifted (id: string): Promise<void> {
    await admin.zrem(BAN_INDEX_KEY, id)
    await admin.publish(BAN_LIFT_CHANNEL, id)
  }

  return {
    /** What a decision of `id` would find now, changing nothing. */
    peek: (id: string, ask: Ask) => bounded(async () => {
      const account = new Account(id, limiterKey(id), '').configure({ limits: ask.limits, ban: null, monthLimit: ask.monthLimit, overage: ask.overage }) // a read: no ban counted
      const entries = [entryOf(account, 0, 1, 0, 0, [], false)]
      const { now, replies } = readGrantReply(await port.run(GRANT, grantKeys(entries), grantArgs('admin', entries)), 1)
      return consumeResult(account, 'peek', now, 'store', replies[0]!.bannedUntil, replies[0])
    }),
    /** A ban started (this process learnt it from a reply): indexed for listing. */
    noteBan (id: string, until: number) {
      admin.zadd(BAN_INDEX_KEY, until, id).catch(() => { /* listed from the next ban account process learns */ })
    },
    listBans: () => bounded(async () => {
      const now = await redisNow()
      await admin.zremrangebyscore(BAN_INDEX_KEY, '-inf', now)
      const ids = await admin.zrangebyscore(BAN_INDEX_KEY, now, '+inf')
      const fields = await Promise.all(ids.map((id) => admin.hmget(limiterKey(id), ...BAN_FIELDS)))
      const bans: BanEntry[] = []
      ids.forEach((id, index) => {
        const ban = parseBan(fields[index] ?? [])
        if (ban !== undefined && ban.until > now) bans.push({ id, until: ban.until })
      })
      return bans
    }),
    liftBan: (id: string) => bounded(async () => {
      const key = limiterKey(id)
      const [fields, now] = await Promise.all([admin.hmget(key, ...BAN_FIELDS), redisNow()])
      await admin.hdel(key, ...BAN_FIELDS, FIELD.recentRejections)
      await lifted(id)
      return (parseBan(fields)?.until ?? 0) > now
    }),
    escalationLevel: (id: string) => bounded(async () => {
      const [fields, now] = await Promise.all([admin.hmget(limiterKey(id), ...BAN_FIELDS), redisNow()])
      const ban = parseBan(fields)
      return ban === undefined || ban.lastEnd + ESCALATION_MS <= now ? -1 : ban.level
    }),
    reset: (id: string) => bounded(async () => {
      forget(id)
      const deleted = await admin.del(limiterKey(id), dayKey(id))
      await lifted(id)
      return deleted > 0
    }),
    watchLifts (onLift: (id: string | undefined) => void) {
      // A connection of its own (a subscribed connection runs no other command); lifts published while it was away
      // are lost, so each (re)connection or topology change forgets every cached ban. A standalone connection
      // subscribes on each 'ready' itself: ioredis's own re-subscribe sends SUBSCRIBE with no rejection handler, so a
      // gateway closed before Redis answers it would reject unhandled. A Cluster's subscriber (a node it picks, picked
      // again when that node goes) re-subscribes with a handler of its own.
      const sub = client instanceof Cluster
        ? client.duplicate([], { enableOfflineQueue: true })
        : client.duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: null, autoResubscribe: false })
      subscriber = sub
      const subscribe = (): void => {
        ;(sub as Redis).subscribe(BAN_LIFT_CHANNEL).catch(() => { /* the connection closed: the next 'ready' subscribes */ })
      }
      sub.on('error', () => { /* the main client reports connection errors */ })
      sub.on('message', (channel: string, id: string) => {
        if (channel !== BAN_LIFT_CHANNEL) return
        forget(id)
        onLift(id)
      })
      const forgetAll = (): void => { onLift(undefined) }
      if (sub instanceof Cluster) {
        sub.on('ready', forgetAll)
        sub.on('+node', forgetAll)
        sub.on('-node', forgetAll)
        subscribe()
      } else {
        sub.on('ready', () => { forgetAll(); subscribe() })
      }
    },
    close () {
      subscriber?.disconnect()
      admin.disconnect()
    }
  }
}
