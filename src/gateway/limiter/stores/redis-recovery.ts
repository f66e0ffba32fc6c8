// The Redis side of coming back from a fault, for the resilient store: each master's epoch marker
// (lua/epoch.lua: a changed value means its data was lost), the process registry's heartbeat
// (lua/heartbeat.lua: how many gateway processes share the consumers), writing the fallback's
// admissions back (lua/write-back.lua), re-seeding a consumer after a loss (lua/reseed.lua), and
// the connections' losses and returns (a connection that dropped may come back to an emptied
// Redis). Calls that are not decisions: they never run on the hot path.
import calculateSlot from 'cluster-key-slot'
import { Cluster, type Redis } from 'ioredis'
import { defineScripts, redisKeys } from './redis-scripts.js'
import type { WriteBackEntry } from './write-back.js'

/** The registry's sorted set (one key, on whichever master owns its slot). */
export const REGISTRY_KEY = 'petstore:gateways'
const EPOCH_KEY_PREFIX = 'petstore:epoch:'

/** What a process knew of a consumer when Redis lost it: its counts at one reply, and its ban. */
export interface Floor {
  readonly minuteBucket: number
  readonly minute: number
  readonly dayBucket: number
  readonly day: number
  /** Redis ms the ban ends; 0: none. */
  readonly bannedUntil: number
}

export interface ConnectionEvents {
  /** The connection to `shard` closed: what it holds may be gone when it comes back. */
  lost: (shard: string) => void
  /** The connection to `shard` is ready again. */
  ready: (shard: string) => void
}

export interface RecoveryCalls {
  /** The masters ('' for one Redis, `host:port` on a Cluster). */
  shards: () => string[]
  /** The marker's value on `shard`'s master (set to `candidate` if missing), and the marker's key (the same data set keeps it). */
  epoch: (shard: string, candidate: string) => Promise<{ key: string, value: string }>
  /** Registers `holder` (or removes it: `leave`) and counts the processes heard from within `horizonMs`. */
  heartbeat: (holder: string, horizonMs: number, leave?: boolean) => Promise<number>
  /** Adds `entries` to `id`'s windows unless `holder`'s batch `seq` was applied already; the Redis time it ran. */
  writeBack: (id: string, holder: string, seq: number, entries: readonly WriteBackEntry[]) => Promise<number>
  /** Puts `floor` back as the least `id`'s windows hold, and its ban. */
  reseed: (id: string, floor: Floor) => Promise<void>
  watchConnections: (events: ConnectionEvents) => void
}

function nodeKey (node: Redis): string {
  return `${node.options.host ?? '127.0.0.1'}:${node.options.port ?? 6379}`
}

export function createRedisRecovery (client: Redis | Cluster): RecoveryCalls {
  defineScripts(client)
  const cluster = client instanceof Cluster ? client : undefined
  const markers = new Map<string, string>()

  /** A marker key in `shard`'s slots: a hash tag found by trying names until one lands there. */
  function markerOf (shard: string): string {
    if (cluster === undefined) return `${EPOCH_KEY_PREFIX}{0}`
    const cached = markers.get(shard)
    if (cached !== undefined && cluster.slots[calculateSlot(cached)]?.[0] === shard) return cached
    for (let i = 0; i < 100_000; i++) {
      const key = `${EPOCH_KEY_PREFIX}{${i}}`
      if (cluster.slots[calculateSlot(key)]?.[0] === shard) {
        markers.set(shard, key)
        return key
      }
    }
    throw new Error(`no slot of ${shard} found`)
  }

  return {
    shards: () => cluster === undefined ? [''] : cluster.nodes('master').map(nodeKey),
    async epoch (shard, candidate) {
      const key = markerOf(shard)
      return { key, value: await client.petstoreEpoch(key, candidate) }
    },
    heartbeat: async (holder, horizonMs, leave = false) => await client.petstoreHeartbeat(REGISTRY_KEY, holder, horizonMs, leave ? 1 : 0),
    async writeBack (id, holder, seq, entries) {
      const [m, d] = redisKeys(id)
      const args = entries.flatMap((e) => [e.minute, e.day, e.count])
      const [, now] = await client.petstoreWriteBack(m, d, holder, seq, ...args)
      return now
    },
    async reseed (id, floor) {
      const [m, d, b] = redisKeys(id)
      await client.petstoreReseed(m, d, b, floor.minuteBucket, floor.minute, floor.dayBucket, floor.day, floor.bannedUntil)
    },
    watchConnections (events) {
      if (cluster === undefined) {
        client.on('close', () => events.lost(''))
        client.on('ready', () => events.ready(''))
        return
      }
      const seen = new WeakSet<Redis>()
      const add = (node: Redis): void => {
        if (seen.has(node)) return
        seen.add(node)
        const key = nodeKey(node)
        // A replica's connection holds no consumer's decisions: only masters are shards.
        node.on('close', () => { if (cluster.nodes('master').includes(node)) events.lost(key) })
        node.on('ready', () => events.ready(key))
      }
      for (const node of cluster.nodes('all')) add(node)
      cluster.on('+node', add)
    }
  }
}
