// Settings → the limiter's store: the Redis store when they name a Redis (standalone, Sentinel or Cluster), else the
// in-process store. Start-up waits (bounded) for every shard to come up, so the first requests are decided in Redis.
import { randomBytes } from 'node:crypto'
import { createRedisClient, describeRedis, waitReady, type RedisSettings } from '../redis/connection.js'
import { createMemoryStore } from './memory/store.js'
import { ioredisPort, nodeRuntime } from './redis/ioredis-port.js'
import { DEFAULT_OUTAGE_ALLOWANCE_PERCENT, DEFAULT_STORE_PROCESSES, type StoreOnError } from './redis/outage.js'
import type { ShardState } from './redis/shard.js'
import { createRedisStore } from './redis/store.js'
import type { LimiterStore } from './store.js'

export const DEFAULT_READY_WAIT_MS = 3_000

/** STORE_TIMEOUT_MS, STORE_ON_ERROR, STORE_OUTAGE_ALLOWANCE_PERCENT, STORE_PROCESSES, STORE_RECOVERY_BARRIER_MS, ANONYMOUS_STATE_MAX (docs/configuration.md). */
export interface StoreSettings extends RedisSettings {
  readonly storeTimeoutMs?: number | undefined
  readonly storeOnError?: StoreOnError | undefined
  readonly storeOutageAllowancePercent?: number | undefined
  readonly storeProcesses?: number | undefined
  readonly recoveryBarrierMs?: number | undefined
  readonly anonymousStateMax?: number | undefined
}

export interface CreateStoreOptions {
  /** Connection errors (ioredis keeps reconnecting by itself). */
  onError?: (err: Error) => void
  /** A shard went down, is recovering or is up again, and why. */
  onShardChange?: (shard: string, state: ShardState, reason: string) => void
  readyWaitMs?: number
  /** The in-process store's clock, Unix ms (default Date.now). */
  now?: () => number
}

export async function createStore (settings: StoreSettings, opts: CreateStoreOptions = {}): Promise<LimiterStore> {
  const client = createRedisClient(settings)
  if (client === undefined) return createMemoryStore({ now: opts.now, maxAnonymousStates: settings.anonymousStateMax })
  client.on('error', (err: Error) => opts.onError?.(err))
  const wait = opts.readyWaitMs ?? DEFAULT_READY_WAIT_MS
  const started = Date.now()
  await waitReady(client, wait)
  const store = createRedisStore(client, {
    port: ioredisPort(client),
    runtime: nodeRuntime(),
    description: describeRedis(settings),
    holder: randomBytes(6).toString('base64url'),
    timeoutMs: settings.storeTimeoutMs,
    policy: settings.storeOnError,
    allowance: { share: (settings.storeOutageAllowancePercent ?? DEFAULT_OUTAGE_ALLOWANCE_PERCENT) / 100, processes: settings.storeProcesses ?? DEFAULT_STORE_PROCESSES },
    barrierMs: settings.recoveryBarrierMs,
    anonymousMax: settings.anonymousStateMax,
    onShardChange: opts.onShardChange
  })
  await store.settled(Math.max(0, wait - (Date.now() - started)))
  return store
}
