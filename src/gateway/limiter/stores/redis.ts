// The shared store: window counters and bans in Redis, so every gateway process enforces one limit.
// One implementation for an ioredis client of any topology (standalone, Sentinel, Cluster): all of a
// consumer's state carries one hash tag ({id}) and so lives in one slot, and a decision is made by
// one of the scripts of redis-scripts.ts (decide, decide batch, peek, lease, give back), whose files
// document their KEYS, ARGV and reply. Calls are batched per event-loop turn (turn-end.ts: every
// request read in one poll phase): the first call of a turn corks the connections' sockets until
// the turn's end uncorks them, so every call of the turn leaves in one write per connection; with
// `batchMax` above 1 (off by default, see DEFAULT_REDIS_BATCH_MAX) the `consume` calls of one turn
// are also decided by one decide-batch script call (on a Cluster, one per slot: a script's keys
// must share one). A batch's reply resolves its calls as soon as it is read (unlike ioredis
// auto-pipelining, which holds a batch until the previous one has answered): batching costs a
// request no wait beyond the end of its own turn.
// Bans live in per-consumer `rl:{id}:b` hashes, not a global set (which a Cluster could not update
// atomically with the consumer's slot); listing them SCANs every master. Every gateway caches a ban
// until it ends, so a lift or reset is published on BAN_LIFT_CHANNEL (classic pub/sub, which a
// Cluster broadcasts to every node) and each gateway drops its cache entry.
import calculateSlot from 'cluster-key-slot'
import { Cluster, type Redis } from 'ioredis'
import { LRUCache } from 'lru-cache'
import type { BanEntry, ConsumeResult, StoreDescription } from '../store.js'
import type { LeasingStore } from './leases.js'
import type { BanPolicy, Limits } from '../../config/types.js'
import { atTurnEnd } from './turn-end.js'
import { banArg, defineScripts, KEY_PREFIX, leaseArgs, redisKeys, toResult, type DecisionReply, type ScriptArg } from './redis-scripts.js'

export { KEY_PREFIX, redisKeys }
export const BAN_LIFT_CHANNEL = 'petstore:ban-lifted'
/** Limiter ids whose Redis key names (minute, day, ban) are kept built rather than concatenated per call. */
export const DEFAULT_REDIS_KEY_NAMES_CACHE_SIZE = 10_000
/**
 * Decisions one decide-batch call carries at most when batching is on (Redis runs a script alone:
 * a long one delays every other command).
 */
export const REDIS_BATCH_MAX = 100
/**
 * Batching is off by default (1: one decide call per decision; STORE_BATCH_MAX turns it on): the
 * attack tests over-admitted with it on until the local fallback counted queued calls as admitted,
 * and it has not yet had the runs that would make it the default (docs/limiter-internals.md).
 * Everything else of the turn (one write, one timer) is on.
 */
export const DEFAULT_REDIS_BATCH_MAX = 1
const SCAN_COUNT = 1000
/** How long past a ban's end the scripts remember its level for escalation (window.lua's ESCALATION_MS). */
const ESCALATION_MEMORY_MS = 86_400_000

/** The Redis store: the contract, blocks for the lease table (stores/leases.ts), and its shards and eviction policy for the resilient store. */
export type RedisStore = LeasingStore

export interface RedisStoreOptions {
  /** How the store names itself (`sentinel` for a client that found its master through Sentinel). */
  kind?: StoreDescription['kind']
  /** Configured nodes or seeds, `host:port`, for describe(). */
  nodes?: readonly string[]
  /** Hears every reply that carried a decision or a peek (a late one included), with the gateway time its call was made (the `local` fallback's knowledge). */
  observe?: (id: string, result: ConsumeResult, sentAt: number) => void
  /** The gateway clock, Unix ms (the call times `observe` is given). */
  now?: () => number
  /** Decisions one script call carries at most (default DEFAULT_REDIS_BATCH_MAX; REDIS_BATCH_MAX to batch); 1: one decide call per decision. */
  batchMax?: number
}

/** A `consume` waiting for the end of its turn. */
interface Queued {
  readonly id: string
  readonly keys: readonly [string, string, string]
  readonly limits: Limits
  readonly ban: BanPolicy | null
  readonly sentAt: number
  readonly resolve: (result: ConsumeResult) => void
  readonly reject: (err: unknown) => void
}

export function createRedisStore (client: Redis | Cluster, opts: RedisStoreOptions = {}): RedisStore {
  defineScripts(client)
  const isCluster = client instanceof Cluster
  const kind = opts.kind ?? (isCluster ? 'cluster' : 'redis')
  const nodes = opts.nodes ?? (isCluster ? [] : [`${(client as Redis).options.host ?? '127.0.0.1'}:${(client as Redis).options.port ?? 6379}`])
  const keyCache = new LRUCache<string, ReturnType<typeof redisKeys>>({ max: DEFAULT_REDIS_KEY_NAMES_CACHE_SIZE })
  const observe = opts.observe
  const now = opts.now ?? Date.now
  const batchMax = Math.max(1, opts.batchMax ?? DEFAULT_REDIS_BATCH_MAX)
  /** This turn's decisions, by slot on a Cluster ('' otherwise). */
  const queued = new Map<number | '', Queued[]>()
  let subscriber: Redis | Cluster | undefined

  function heard (id: string, result: ConsumeResult, sentAt: number): ConsumeResult {
    observe?.(id, result, sentAt)
    return result
  }

  function keysOf (id: string): ReturnType<typeof redisKeys> {
    let keys = keyCache.get(id)
    if (keys === undefined) {
      keys = redisKeys(id)
      keyCache.set(id, keys)
    }
    return keys
  }

  function masters (): Redis[] {
    return isCluster ? (client as Cluster).nodes('master') : [client as Redis]
  }

  let corked: Array<{ uncork: () => void }> | undefined
  /** The end of a turn: its decisions go out in batches, then every write of the turn leaves. */
  function endTurn (): void {
    if (queued.size > 0) {
      for (const batch of queued.values()) send(batch)
      queued.clear()
    }
    for (const stream of corked ?? []) stream.uncork()
    corked = undefined
  }
  /** Holds this turn's writes until its end (turn-end.ts): one write per connection per turn. */
  function batchThisTurn (): void {
    if (corked !== undefined) return
    corked = []
    for (const connection of masters()) {
      const stream = connection.stream as (typeof connection.stream & { cork?: () => void, uncork?: () => void }) | undefined
      if (stream?.cork === undefined || stream.uncork === undefined || connection.status !== 'ready') continue
      stream.cork()
      corked.push(stream as { uncork: () => void })
    }
    atTurnEnd(endTurn)
  }

  function decideOne (q: Queued): void {
    const [m, d, b] = q.keys
    client.petstoreDecide(m, d, b, q.limits.perMinute, q.limits.perDay, banArg(q.ban))
      .then((reply) => { q.resolve(heard(q.id, toResult(reply), q.sentAt)) }, q.reject)
  }

  /** One group's decisions (one slot on a Cluster), in order, in calls of at most batchMax. */
  function send (batch: Queued[]): void {
    for (let from = 0; from < batch.length; from += batchMax) {
      const part = batch.length <= batchMax ? batch : batch.slice(from, from + batchMax)
      if (part.length === 1) {
        decideOne(part[0]!)
        continue
      }
      const args: ScriptArg[] = new Array<ScriptArg>(1 + part.length * 6)
      args[0] = part.length * 3
      let k = 1
      for (const q of part) {
        args[k++] = q.keys[0]
        args[k++] = q.keys[1]
        args[k++] = q.keys[2]
      }
      for (const q of part) {
        args[k++] = q.limits.perMinute
        args[k++] = q.limits.perDay
        args[k++] = banArg(q.ban)
      }
      client.petstoreDecideBatch(...(args as [number, ...ScriptArg[]])).then((replies: DecisionReply[]) => {
        part.forEach((q, i) => { q.resolve(heard(q.id, { ...toResult(replies[i]!), via: 'batch' }, q.sentAt)) })
      }, (err: unknown) => { for (const q of part) q.reject(err) })
    }
  }

  async function storeNow (): Promise<number> {
    const [seconds, micros] = await client.time()
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
  }

  async function scanMasters (match: string): Promise<string[]> {
    const found: string[] = []
    await Promise.all(masters().map(async (node) => {
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
    consume (id, limits, ban) {
      const keys = keysOf(id)
      batchThisTurn()
      const sentAt = now()
      return new Promise<ConsumeResult>((resolve, reject) => {
        const q: Queued = { id, keys, limits, ban, sentAt, resolve, reject }
        if (batchMax === 1) {
          decideOne(q)
          return
        }
        const group = isCluster ? calculateSlot(keys[0]) : ''
        const batch = queued.get(group)
        if (batch === undefined) queued.set(group, [q])
        else batch.push(q)
      })
    },
    async peek (id, limits) {
      const [m, d] = keysOf(id)
      batchThisTurn()
      const sentAt = now()
      return heard(id, toResult(await client.petstorePeek(m, d, limits.perMinute, limits.perDay)), sentAt)
    },
    async lease (id, limits, ban, want, holder, unused) {
      const [m, d, b] = keysOf(id)
      batchThisTurn()
      const sentAt = now()
      const reply = await client.petstoreLease(m, d, b, limits.perMinute, limits.perDay, banArg(ban), ...leaseArgs(want, holder, unused))
      // The whole block is counted in Redis: the knowledge takes the count with it.
      return { result: heard(id, toResult(reply), sentAt), granted: reply[9] }
    },
    async giveBack (id, unused) {
      const [m, d] = keysOf(id)
      await client.petstoreGiveBack(m, d, unused.minuteBucket, unused.dayBucket, unused.count)
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
      // The scripts keep the last ban's end and level for 24 h past that end (their escalation memory).
      const [[until, level], t] = await Promise.all([client.hmget(keysOf(id)[2], 'u', 'l'), storeNow()])
      if (until === null || level === null || Number(until) + ESCALATION_MEMORY_MS <= t) return -1
      return Number(level)
    },
    async reset (id) {
      // One multi-key DEL is atomic (the three keys share a slot): no script needed.
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
    async maxmemoryPolicy () {
      try {
        const reply = await masters()[0]?.config('GET', 'maxmemory-policy') as string[] | undefined
        return reply?.[1]
      } catch {
        return undefined // CONFIG is often renamed or denied by ACL on managed Redis
      }
    },
    shardOf: isCluster
      ? (id) => (client as Cluster).slots[calculateSlot(keysOf(id)[0])]?.[0] ?? ''
      : () => '',
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
