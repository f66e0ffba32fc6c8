// Settings → store: Redis Cluster when REDIS_CLUSTER_NODES is set, Sentinel when REDIS_SENTINELS is,
// standalone Redis for REDIS_URL (redis:// or rediss://), else the in-process store. Clients fail
// fast (no offline queue) so a dead Redis answers an error instead of a hanging request (the Redis
// store batches one turn's calls into one write itself: stores/redis.ts), and a call in flight when
// its connection drops fails then and there: resent on the next connection it could run on a Redis
// that lost its data before the resilient store has re-seeded it. A Redis store gets the lease
// table (STORE_LEASES) and is wrapped in the resilient store (timeout, circuit breaker,
// STORE_ON_ERROR), which answers a lease's admissions first, with no timer, and learns what the
// `local` fallback needs from every reply; the in-process store needs none of it.
import { randomBytes } from 'node:crypto'
import { createRedisClient, DEFAULT_REDIS_SENTINEL_NAME, describeRedis, waitReady, type RedisSettings } from '../redis/connection.js'
import type { LimiterStore } from './store.js'
import { plainHealth, type StoreHealth } from './store-health.js'
import type { StoreOnError } from './stores/fallback-policy.js'
import { createKnowledge } from './stores/knowledge.js'
import { createLeasedStore } from './stores/leases.js'
import { createMemoryStore } from './stores/memory.js'
import { createRedisRecovery } from './stores/redis-recovery.js'
import { createRedisStore } from './stores/redis.js'
import { createResilientStore } from './stores/resilient.js'

export { createRedisClient, DEFAULT_REDIS_SENTINEL_NAME, waitReady }
export const DEFAULT_READY_WAIT_MS = 3_000

export interface StoreSettings extends RedisSettings {
  /** Budget of one Redis call (STORE_TIMEOUT_MS); see stores/resilient.ts. */
  readonly storeTimeoutMs?: number | undefined
  /** What answers while Redis fails (STORE_ON_ERROR): `local`, `open` or `closed`. */
  readonly storeOnError?: StoreOnError | undefined
  /** ANONYMOUS_STATE_MAX: anonymous clients the in-process store (and the `local` fallback) keeps. */
  readonly anonymousStateMax?: number | undefined
  /** Hot consumers admitted from local leases (STORE_LEASES, default on); see stores/leases.ts. */
  readonly storeLeases?: boolean | undefined
  /** Decisions of one turn per script call (default stores/redis.ts's DEFAULT_REDIS_BATCH_MAX: off); not an environment setting yet. */
  readonly storeBatchMax?: number | undefined
}

export interface CreateStoreOptions {
  /** Connection errors (ioredis keeps reconnecting by itself) and failed calls (timeouts included). */
  onError?: (err: Error) => void
  /** The circuit breaker opened (true) or closed (false). */
  onBreaker?: (open: boolean) => void
  readyWaitMs?: number
  /** The gateway clock, Unix ms (the in-process store, the fallback, lease sizing). Default Date.now. */
  now?: () => number
}

/** The store the limiter decides with, and the health of what is under it. */
export interface StoreStack {
  readonly store: LimiterStore
  readonly health: StoreHealth
}

export const describeSettings = describeRedis

export async function createStore (settings: StoreSettings, opts: CreateStoreOptions = {}): Promise<StoreStack> {
  const now = opts.now ?? Date.now
  const client = createRedisClient(settings)
  const memory = (): LimiterStore => createMemoryStore({ now, maxAnonymousStates: settings.anonymousStateMax })
  if (client === undefined) {
    const store = memory()
    return { store, health: plainHealth(store) }
  }
  client.on('error', (err: Error) => opts.onError?.(err))
  const ready = await waitReady(client, opts.readyWaitMs ?? DEFAULT_READY_WAIT_MS)
  const holder = randomBytes(6).toString('base64url')
  const knowledge = createKnowledge({ shardOf: (id) => redis.shardOf(id), now })
  const redis = createRedisStore(client, { ...describeSettings(settings), observe: knowledge.learn, now, batchMax: settings.storeBatchMax })
  const leased = settings.storeLeases === false ? undefined : createLeasedStore(redis, { now, holder })
  const resilient = createResilientStore(leased ?? redis, {
    timeoutMs: settings.storeTimeoutMs,
    onError: settings.storeOnError,
    onFailure: opts.onError,
    onBreaker: opts.onBreaker,
    fallback: memory(),
    now,
    local: leased?.take,
    knowledge,
    recovery: createRedisRecovery(client),
    holder
  })
  // Counted among the processes, and the epochs known, before the first decision (when Redis is there).
  if (ready) await resilient.start().catch(() => undefined)
  else void resilient.start().catch(() => undefined)
  return { store: resilient, health: resilient }
}
