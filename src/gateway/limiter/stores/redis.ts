// The shared store: window counters and bans in Redis, so every gateway process enforces one limit.
// One implementation for an ioredis client of any topology (standalone, Sentinel, Cluster): all of a
// consumer's state carries one hash tag ({id}) and so lives in one slot, and a decision costs one
// EVALSHA of lua/sliding-window.lua (ioredis `defineCommand` sends it by SHA and reloads it on
// NOSCRIPT) with 3 keys and 4 arguments; the window layout is baked into the script. Decisions are
// batched per event-loop turn: the first call of a turn corks the connections' sockets and a
// process.nextTick uncorks them, so every call of the turn leaves in one write (one writev), and
// each reply still resolves its own call as soon as it is read (unlike ioredis auto-pipelining,
// which holds a batch until the previous one has fully answered).
// Besides the contract, `lease` and `giveBack` reserve and return blocks of admissions for the lease
// table (stores/leases.ts). Bans live in per-consumer `rl:{id}:b` hashes, not a global set (which a
// Cluster could not update atomically with the consumer's slot); listing them SCANs every master.
// Every gateway caches a ban until it ends, so a lift or reset is published on BAN_LIFT_CHANNEL
// (classic pub/sub, which a Cluster broadcasts to every node) and each gateway drops its cache entry.
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { Cluster, type Redis, type Result } from 'ioredis'
import { LRUCache } from 'lru-cache'
import type { BanPolicy, Limits } from '../../config/types.js'
import type { BanEntry, ConsumeOutcome, ConsumeResult, LimiterStore, StoreDescription } from '../store.js'

export const KEY_PREFIX = 'rl:'
export const BAN_LIFT_CHANNEL = 'petstore:ban-lifted'
/** Limiter ids whose Redis key names (minute, day, ban) are kept built rather than concatenated per call. */
export const DEFAULT_REDIS_KEY_NAMES_CACHE_SIZE = 10_000
const SCAN_COUNT = 1000
/** How long past a ban's end the script remembers its level for escalation (its ESCALATION_MS). */
const ESCALATION_MEMORY_MS = 86_400_000
const COMMAND = 'petstoreSlidingWindow'
const OUTCOMES: readonly ConsumeOutcome[] = ['ok', 'rate_limited', 'key_banned', 'ban_started']

export const SLIDING_WINDOW_LUA = readFileSync(new URL('../lua/sliding-window.lua', import.meta.url), 'utf8')
export const SLIDING_WINDOW_SHA = createHash('sha1').update(SLIDING_WINDOW_LUA).digest('hex')

type ScriptReply = [number, number, number, number, number, number, number, number, number, number]
type ScriptArg = string | number

declare module 'ioredis' {
  interface RedisCommander<Context> {
    petstoreSlidingWindow: (...args: ScriptArg[]) => Result<ScriptReply, Context>
  }
}

/** A block of admissions counted in Redis at once; the lease table spends it locally. */
export interface Grant {
  /** The decision for the request that asked (counts include the whole block). */
  readonly result: ConsumeResult
  /** Admissions counted, this request's included (0 when not admitted). */
  readonly granted: number
}

/** What an ended lease hands back: its buckets (by index) and how many of its admissions went unused. */
export interface Unused {
  readonly minuteBucket: number
  readonly dayBucket: number
  readonly count: number
}

export interface RedisStore extends LimiterStore {
  /** Like `consume`, counting up to `want` admissions (this request's included) when there is room. */
  lease: (id: string, limits: Limits, ban: BanPolicy | null, want: number, holder: string, unused: Unused | undefined) => Promise<Grant>
  /** Returns an ended lease's unused admissions to the buckets they were counted in. */
  giveBack: (id: string, unused: Unused) => Promise<void>
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
export function redisKeys (id: string): [minute: string, day: string, ban: string] {
  const base = `${KEY_PREFIX}{${id}}:`
  return [`${base}m`, `${base}d`, `${base}b`]
}

/** The script's ban argument: '' (never banned) or 'threshold,windowMs,durationMs,maxMs', built once per policy object. */
const policyArgs = new WeakMap<BanPolicy, string>()
export function banArg (ban: BanPolicy | null): string {
  if (ban === null) return ''
  let arg = policyArgs.get(ban)
  if (arg === undefined) {
    arg = `${ban.threshold},${ban.windowSeconds * 1000},${ban.durationSeconds * 1000},${ban.maxDurationSeconds * 1000}`
    policyArgs.set(ban, arg)
  }
  return arg
}

function toResult (reply: ScriptReply): ConsumeResult {
  return {
    outcome: OUTCOMES[reply[0]] ?? 'rate_limited',
    now: reply[1],
    minute: { count: reply[2], resetAt: reply[3], retryAt: reply[4] },
    day: { count: reply[5], resetAt: reply[6], retryAt: reply[7] },
    bannedUntil: reply[8]
  }
}

export interface RedisStoreOptions {
  /** How the store names itself (`sentinel` for a client that found its master through Sentinel). */
  kind?: StoreDescription['kind']
  /** Configured nodes or seeds, `host:port`, for describe(). */
  nodes?: readonly string[]
}

export function createRedisStore (client: Redis | Cluster, opts: RedisStoreOptions = {}): RedisStore {
  client.defineCommand(COMMAND, { numberOfKeys: 3, lua: SLIDING_WINDOW_LUA })
  const isCluster = client instanceof Cluster
  const kind = opts.kind ?? (isCluster ? 'cluster' : 'redis')
  const nodes = opts.nodes ?? (isCluster ? [] : [`${(client as Redis).options.host ?? '127.0.0.1'}:${(client as Redis).options.port ?? 6379}`])
  const keyCache = new LRUCache<string, ReturnType<typeof redisKeys>>({ max: DEFAULT_REDIS_KEY_NAMES_CACHE_SIZE })
  let subscriber: Redis | Cluster | undefined

  function keysOf (id: string): ReturnType<typeof redisKeys> {
    let keys = keyCache.get(id)
    if (keys === undefined) {
      keys = redisKeys(id)
      keyCache.set(id, keys)
    }
    return keys
  }

  let corked: Array<{ uncork: () => void }> | undefined
  function uncork (): void {
    for (const stream of corked ?? []) stream.uncork()
    corked = undefined
  }
  /** Holds this turn's writes until process.nextTick: one write per connection per turn. */
  function batchThisTurn (): void {
    if (corked !== undefined) return
    const connections: Redis[] = isCluster ? (client as Cluster).nodes('master') : [client as Redis]
    corked = []
    for (const connection of connections) {
      const stream = connection.stream as (typeof connection.stream & { cork?: () => void, uncork?: () => void }) | undefined
      if (stream?.cork === undefined || stream.uncork === undefined || connection.status !== 'ready') continue
      stream.cork()
      corked.push(stream as { uncork: () => void })
    }
    process.nextTick(uncork)
  }

  async function call (mode: 'c' | 'p', id: string, limits: Limits, ban: string): Promise<ConsumeResult> {
    const [m, d, b] = keysOf(id)
    batchThisTurn()
    return toResult(await client.petstoreSlidingWindow(m, d, b, mode, limits.perMinute, limits.perDay, ban))
  }

  async function storeNow (): Promise<number> {
    const [seconds, micros] = await client.time()
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
  }

  async function scanMasters (match: string): Promise<string[]> {
    const masters: Redis[] = isCluster ? (client as Cluster).nodes('master') : [client as Redis]
    const found: string[] = []
    await Promise.all(masters.map(async (node) => {
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
    kind,
    describe: () => ({ kind, nodes }),
    consume: (id, limits, ban) => call('c', id, limits, banArg(ban)),
    peek: (id, limits) => call('p', id, limits, ''),
    async lease (id, limits, ban, want, holder, unused) {
      const [m, d, b] = keysOf(id)
      batchThisTurn()
      const reply = await client.petstoreSlidingWindow(m, d, b, 'l', limits.perMinute, limits.perDay, banArg(ban), want, holder,
        unused?.minuteBucket ?? 0, unused?.dayBucket ?? 0, unused?.count ?? 0)
      return { result: toResult(reply), granted: reply[9] }
    },
    async giveBack (id, unused) {
      const [m, d, b] = keysOf(id)
      await client.petstoreSlidingWindow(m, d, b, 'r', unused.minuteBucket, unused.dayBucket, unused.count)
    },
    async listBans () {
      const keys = await scanMasters(`${KEY_PREFIX}{*}:b`)
      const [values, t] = await Promise.all([Promise.all(keys.map((key) => client.hget(key, 'u'))), storeNow()])
      const bans: BanEntry[] = []
      keys.forEach((key, i) => {
        const until = Number(values[i] ?? 0)
        if (until > t) bans.push({ id: key.slice(KEY_PREFIX.length + 1, -'}:b'.length), until })
      })
      return bans
    },
    async liftBan (id) {
      const [m, , b] = keysOf(id)
      const [until, t] = await Promise.all([client.hget(b, 'u'), storeNow()])
      await Promise.all([client.hdel(m, 'b'), client.del(b)])
      await client.publish(BAN_LIFT_CHANNEL, id)
      return Number(until ?? 0) > t
    },
    async escalationLevel (id) {
      // The script keeps the last ban's end and level for 24 h past that end (its escalation memory).
      const [[until, level], t] = await Promise.all([client.hmget(keysOf(id)[2], 'u', 'l'), storeNow()])
      if (until === null || level === null || Number(until) + ESCALATION_MEMORY_MS <= t) return -1
      return Number(level)
    },
    async reset (id) {
      const [m, d, b] = keysOf(id)
      const deleted = await client.petstoreSlidingWindow(m, d, b, 'x')
      await client.publish(BAN_LIFT_CHANNEL, id)
      return Number(deleted) > 0
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
    async maxmemoryPolicy () {
      try {
        const node = isCluster ? (client as Cluster).nodes('master')[0] : client as Redis
        const reply = await node?.config('GET', 'maxmemory-policy') as string[] | undefined
        return reply?.[1]
      } catch {
        return undefined // CONFIG is often renamed or denied by ACL on managed Redis
      }
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
