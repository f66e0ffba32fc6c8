// The one way the gateway connects to Redis, for the limiter and the usage history alike:
// settings → an ioredis client (Cluster when REDIS_CLUSTER_NODES is set, Sentinel when
// REDIS_SENTINELS is, standalone for REDIS_URL), what the settings name (kind and nodes, never
// credentials), and a bounded wait for readiness. Clients fail fast (no offline queue, no retry of
// a command): a dead Redis answers an error at once instead of a request that hangs, and a call in
// flight when its connection drops fails there and then — resent on a new connection it could run
// on a Redis that lost its data.
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis'

export const DEFAULT_CONNECT_TIMEOUT_MS = 2_000
/** REDIS_SENTINEL_NAME: the master name Sentinel is asked for. */
export const DEFAULT_REDIS_SENTINEL_NAME = 'mymaster'
/** Longest wait between two reconnection attempts (ioredis backs off up to this). */
export const DEFAULT_RECONNECT_MAX_MS = 500

export interface RedisSettings {
  readonly redisUrl?: string | undefined
  readonly redisClusterNodes?: readonly string[] | undefined
  readonly redisSentinels?: readonly string[] | undefined
  readonly redisSentinelName?: string | undefined
}

/** Where Redis is, as the start-up log and /readyz show it: never credentials. */
export interface RedisDescription {
  readonly kind: 'memory' | 'redis' | 'sentinel' | 'cluster'
  /** `host:port` of each configured node or seed ([] without Redis). */
  readonly nodes: readonly string[]
}

export type RedisClient = Redis | Cluster

const CLIENT_OPTIONS: RedisOptions = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  autoResendUnfulfilledCommands: false,
  connectTimeout: DEFAULT_CONNECT_TIMEOUT_MS,
  retryStrategy: (times) => Math.min(times * 50, DEFAULT_RECONNECT_MAX_MS)
}

function hostPort (seed: string): { host: string, port: number } {
  const at = seed.lastIndexOf(':')
  return at < 0 ? { host: seed, port: 6379 } : { host: seed.slice(0, at), port: Number(seed.slice(at + 1)) }
}

/** A new client for the settings, or undefined when they name no Redis. `extra`: options of this connection's own. */
export function createRedisClient (settings: RedisSettings, extra: RedisOptions = {}): RedisClient | undefined {
  const options = { ...CLIENT_OPTIONS, ...extra }
  if (settings.redisClusterNodes !== undefined && settings.redisClusterNodes.length > 0) {
    const cluster: ClusterOptions = { enableOfflineQueue: false, redisOptions: options, clusterRetryStrategy: (times) => Math.min(times * 50, DEFAULT_RECONNECT_MAX_MS) }
    return new Cluster(settings.redisClusterNodes.map(hostPort), cluster)
  }
  if (settings.redisSentinels !== undefined && settings.redisSentinels.length > 0) {
    const url = settings.redisUrl === undefined ? undefined : new URL(settings.redisUrl)
    return new Redis({
      ...options,
      sentinels: settings.redisSentinels.map(hostPort),
      name: settings.redisSentinelName ?? DEFAULT_REDIS_SENTINEL_NAME,
      ...(url?.password ? { password: decodeURIComponent(url.password), sentinelPassword: decodeURIComponent(url.password) } : {}),
      ...(url?.protocol === 'rediss:' ? { tls: {}, enableTLSForSentinelMode: true } : {})
    })
  }
  if (settings.redisUrl !== undefined) return new Redis(settings.redisUrl, options)
  return undefined
}

/** Which Redis the settings select, and its nodes (`host:port`, never credentials). */
export function describeRedis (settings: RedisSettings): RedisDescription {
  if (settings.redisClusterNodes !== undefined && settings.redisClusterNodes.length > 0) return { kind: 'cluster', nodes: [...settings.redisClusterNodes] }
  if (settings.redisSentinels !== undefined && settings.redisSentinels.length > 0) return { kind: 'sentinel', nodes: [...settings.redisSentinels] }
  if (settings.redisUrl !== undefined) {
    const url = new URL(settings.redisUrl)
    return { kind: 'redis', nodes: [`${url.hostname}:${url.port === '' ? 6379 : url.port}`] }
  }
  return { kind: 'memory', nodes: [] }
}

/** Resolves true once the client is ready, false if it is not within `ms` (it keeps trying). */
export async function waitReady (client: RedisClient, ms: number): Promise<boolean> {
  if (client.status === 'ready') return true
  return await new Promise((resolve) => {
    const timer = setTimeout(() => { client.off('ready', onReady); resolve(false) }, ms)
    function onReady (): void { clearTimeout(timer); resolve(true) }
    client.once('ready', onReady)
  })
}
