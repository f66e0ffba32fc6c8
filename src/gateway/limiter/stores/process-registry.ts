// Which gateway processes share Redis, and whether Redis still holds what they counted. Every
// DEFAULT_HEARTBEAT_MS a process registers itself in Redis (lua/heartbeat.lua) and reads how many
// processes were heard from within DEFAULT_REGISTRY_HORIZON_MS: the `local` fallback gives each
// one its share of a consumer's room by that count (a process that stopped is counted until the
// horizon passes, which only makes the shares smaller). With it, each master's epoch marker is
// read (lua/epoch.lua): a value other than the one remembered means the master lost its data
// (a restart without persistence, a flush), and `onLost` hands the shard to the resilient store,
// which re-seeds it before deciding there again. The resilient store also verifies a shard before
// closing its breaker, so a restart is caught before the first decision on the empty Redis.
import { randomBytes } from 'node:crypto'
import type { RecoveryCalls } from './redis-recovery.js'

export const DEFAULT_HEARTBEAT_MS = 1_000
/** A process not heard from for this long is no longer counted among those sharing the consumers. */
export const DEFAULT_REGISTRY_HORIZON_MS = 10_000

export interface ProcessRegistry {
  /** Processes sharing the consumers at the last heartbeat answered (at least 1: this one). */
  processes: () => number
  /** Reads `shard`'s epoch marker; true (and `onLost`) when it is not the one this process saw before. */
  verify: (shard: string) => Promise<boolean>
  /** The first heartbeat (this process counted by the others from now on), then one every period. */
  start: () => Promise<void>
  /** Stops the heartbeats and leaves the registry. */
  close: () => Promise<void>
}

export interface ProcessRegistryOptions {
  holder: string
  heartbeatMs?: number
  horizonMs?: number
  /** `shard` lost its data (its marker changed). */
  onLost: (shard: string) => void
  /** Runs a registry call within a time budget (the resilient store's bounded call). */
  bounded: <T>(call: () => Promise<T>) => Promise<T>
}

export function createProcessRegistry (calls: RecoveryCalls, opts: ProcessRegistryOptions): ProcessRegistry {
  const heartbeatMs = opts.heartbeatMs ?? DEFAULT_HEARTBEAT_MS
  const horizonMs = opts.horizonMs ?? DEFAULT_REGISTRY_HORIZON_MS
  const epochs = new Map<string, string>()
  let count = 1
  let timer: NodeJS.Timeout | undefined
  let closed = false

  async function verify (shard: string): Promise<boolean> {
    const { key, value } = await opts.bounded(() => calls.epoch(shard, randomBytes(9).toString('base64url')))
    const before = epochs.get(key)
    epochs.set(key, value)
    if (before === undefined || before === value) return false
    opts.onLost(shard)
    return true
  }

  async function beat (): Promise<void> {
    try {
      count = Math.max(1, await opts.bounded(() => calls.heartbeat(opts.holder, horizonMs)))
    } catch { /* the last count stays */ }
    await Promise.all(calls.shards().map(async (shard) => { await verify(shard).catch(() => false) }))
  }

  function schedule (): void {
    if (closed) return
    timer = setTimeout(() => { void beat().finally(schedule) }, heartbeatMs)
    timer.unref()
  }

  return {
    processes: () => count,
    verify,
    async start () {
      await beat()
      schedule()
    },
    async close () {
      closed = true
      clearTimeout(timer)
      await opts.bounded(() => calls.heartbeat(opts.holder, horizonMs, true)).catch(() => undefined)
    }
  }
}
