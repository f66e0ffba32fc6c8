// The Redis store: the store contract (store.ts) over Redis of any topology, for any number of
// gateway processes. Decisions are grants.ts's (count before admit, with its shard state machine
// and outage policy); ops calls are admin.ts's; health reads both. Built by create-store.ts.
import { Cluster } from 'ioredis'
import type { RedisClient, RedisDescription } from '../../redis/connection.js'
import type { LimiterStore } from '../store.js'
import { createRedisAdmin } from './admin.js'
import { createGrants, type GrantsOptions } from './grants.js'
import { type StoreOnError, withinBudget } from './outage.js'

/** STORE_TIMEOUT_MS: a call unanswered this long fails its shard over to STORE_ON_ERROR (a late reply still counts). */
export const DEFAULT_STORE_TIMEOUT_MS = 250

export interface RedisStoreOptions extends Omit<GrantsOptions, 'timeoutMs' | 'policy' | 'onBan' | 'onOutageAdmission'> {
  description: RedisDescription
  timeoutMs?: number | undefined
  policy?: StoreOnError | undefined
}

export interface RedisStore extends LimiterStore {
  /** Resolves once every shard known is up (Redis answered, any recovery done), or after `ms`. */
  settled: (ms: number) => Promise<void>
}

export function createRedisStore (client: RedisClient, opts: RedisStoreOptions): RedisStore {
  const policy = opts.policy ?? 'local'
  const timeoutMs = opts.timeoutMs ?? DEFAULT_STORE_TIMEOUT_MS
  let errors = 0
  const admitted = { reserve: 0, allowance: 0 }
  const admin = createRedisAdmin(client, (id) => { grants.forget(id) })
  const grants = createGrants({
    ...opts,
    timeoutMs,
    policy,
    onShardChange (shard, state, reason) {
      if (state === 'down') errors++
      opts.onShardChange?.(shard, state, reason)
    },
    onBan: (id, until) => { admin.noteBan(id, until) },
    onOutageAdmission: (kind) => { admitted[kind]++ }
  })
  return {
    describe: () => opts.description,
    consume: (id, ask) => grants.consume(id, ask),
    peek: (id, ask) => admin.peek(id, ask),
    settled: (ms) => grants.settled(ms),
    admin,
    health: {
      errors: () => errors,
      fallbackActive: () => grants.degraded(),
      outageAdmissions: () => ({ ...admitted }),
      async probe () {
        try {
          await withinBudget(client.ping(), timeoutMs)
        } catch (err) {
          if (policy === 'closed') throw err
          return 'fallback'
        }
        return grants.degraded() ? 'fallback' : 'ok'
      },
      async maxmemoryPolicy () {
        try {
          const master = client instanceof Cluster ? client.nodes('master')[0] : client
          const reply = await withinBudget(master?.config('GET', 'maxmemory-policy') ?? Promise.resolve([]), timeoutMs) as string[]
          return reply[1]
        } catch {
          return undefined // CONFIG is often renamed or denied by ACL on managed Redis
        }
      }
    },
    async close () {
      grants.close()
      admin.close()
      try {
        await client.quit()
      } catch {
        client.disconnect()
      }
    }
  }
}
