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
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis'
import type { LimiterStore, StoreDescription } from './store.js'
import { plainHealth, type StoreHealth } from './store-health.js'
import type { StoreOnError } from './stores/fallback-policy.js'
import { createKnowledge } from './stores/knowledge.js'
import { createLeasedStore } from './stores/leases.js'
import { createMemoryStore } from './stores/memory.js'
import { createRedisRecovery } from './stores/redis-recovery.js'
import { createRedisStore } from './stores/redis.js'
import { createResilientStore } from './stores/resilient.js'

export const DEFAULT_CONNECT_TIMEOUT_MS = 2_000
export const DEFAULT_READY_WAIT_MS = 3_000
/** REDIS_SENTINEL_NAME: the master name Sentinel is asked for. */
export const DEFAULT_REDIS_SENTINEL_NAME = 'mymaster'

export interface StoreSettings {
  readonly redisUrl?: string | undefined
  readonly redisClusterNodes?: readonly string[] | undefined
  readonly redisSentinels?: readonly string[] | undefined
  readonly redisSentinelName?: string | undefined
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

const CLIENT_OPTIONS: RedisOptions = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  autoResendUnfulfilledCommands: false,
  connectTimeout: DEFAULT_CONNECT_TIMEOUT_MS
}

function hostPort (seed: string): { host: string, port: number } {
  const at = seed.lastIndexOf(':')
  return at < 0 ? { host: seed, port: 6379 } : { host: seed.slice(0, at), port: Number(seed.slice(at + 1)) }
}

/** Resolves true once the client is ready, false if it is not within `ms` (it keeps trying). */
export async function waitReady (client: Redis | Cluster, ms: number): Promise<boolean> {
  if (client.status === 'ready') return true
  return await new Promise((resolve) => {
    const timer = setTimeout(() => { client.off('ready', onReady); resolve(false) }, ms)
    function onReady (): void { clearTimeout(timer); resolve(true) }
    client.once('ready', onReady)
  })
}

export function createRedisClient (settings: StoreSettings): Redis | Cluster | undefined {
  if (settings.redisClusterNodes !== undefined && settings.redisClusterNodes.length > 0) {
    const options: ClusterOptions = { enableOfflineQueue: false, redisOptions: CLIENT_OPTIONS }
    return new Cluster(settings.redisClusterNodes.map(hostPort), options)
  }
  if (settings.redisSentinels !== undefined && settings.redisSentinels.length > 0) {
    const url = settings.redisUrl === undefined ? undefined : new URL(settings.redisUrl)
    return new Redis({
      ...CLIENT_OPTIONS,
      sentinels: settings.redisSentinels.map(hostPort),
      name: settings.redisSentinelName ?? DEFAULT_REDIS_SENTINEL_NAME,
      ...(url?.password ? { password: decodeURIComponent(url.password), sentinelPassword: decodeURIComponent(url.password) } : {}),
      ...(url?.protocol === 'rediss:' ? { tls: {}, enableTLSForSentinelMode: true } : {})
    })
  }
  if (settings.redisUrl !== undefined) return new Redis(settings.redisUrl, CLIENT_OPTIONS)
  return undefined
}

/** Which store the settings select, and its nodes (`host:port`, never credentials). */
export function describeSettings (settings: StoreSettings): StoreDescription {
  if (settings.redisClusterNodes !== undefined && settings.redisClusterNodes.length > 0) return { kind: 'cluster', nodes: [...settings.redisClusterNodes] }
  if (settings.redisSentinels !== undefined && settings.redisSentinels.length > 0) return { kind: 'sentinel', nodes: [...settings.redisSentinels] }
  if (settings.redisUrl !== undefined) {
    const url = new URL(settings.redisUrl)
    return { kind: 'redis', nodes: [`${url.hostname}:${url.port === '' ? 6379 : url.port}`] }
  }
  return { kind: 'memory', nodes: [] }
}

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
