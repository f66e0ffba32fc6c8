// What this process last heard from Redis about each consumer (its minute and day counts, its ban
// and the Redis time of the reply) and, per shard, how Redis's clock relates to the gateway's. The
// `local` fallback (local-fallback.ts) decides from it while Redis does not answer, and a Redis
// that lost its data is re-seeded from it (docs/limiter-internals.md, "Through faults"). It is
// learned from every reply that carried a decision or a peek, however it arrived (a late reply
// after a timeout included), so batching decisions changes nothing here; never from a shard that
// may have lost its data until that shard is verified, so an emptied Redis cannot teach it zeros.
import { LRUCache } from 'lru-cache'
import { ANONYMOUS_ID_PREFIX } from '../../edge/client-address.js'
import type { ConsumeResult } from '../store.js'

/** Consumers whose last counts are kept; only configured keys are learned, so this follows the key count. */
export const DEFAULT_KNOWLEDGE_MAX = 100_000

export interface Known {
  /** Minute and day counts of the consumer's windows in the reply (its own admission included). */
  minute: number
  day: number
  /** Redis time (Unix ms) of the reply the counts come from; -Infinity: no counts yet (only a ban heard of). */
  at: number
  /** Redis time the consumer's ban ends, from the latest reply (`banAt`); 0: none. */
  bannedUntil: number
  banAt: number
}

/** Redis time at a gateway instant x is within [x + lo, x + hi] (from the latest reply of the shard). */
export interface ShardClock {
  readonly lo: number
  readonly hi: number
  /** Redis time of that reply: the last moment this process knows the shard answered. */
  readonly at: number
}

export interface Knowledge {
  /** Learns from a Redis reply about `id`; `sentAt` is the gateway time the call was made. */
  learn: (id: string, result: ConsumeResult, sentAt: number) => void
  get: (id: string) => Known | undefined
  /** The shard's clock bounds, or undefined: never heard from it. */
  clock: (shard: string) => ShardClock | undefined
  /** Stops learning from `shard` (its data may be lost) until `resume`. */
  suspend: (shard: string) => void
  resume: (shard: string) => void
  forget: (id: string) => void
  /** Every consumer known, most recent first. */
  entries: () => Generator<[string, Known]>
  /** Called with (id, reply time) after each learned reply of a consumer (the write-back ledger drops what it covers). */
  onLearn: (listener: (id: string, at: number) => void) => void
}

export interface KnowledgeOptions {
  /** The shard holding `id` ('' : one shard). */
  shardOf: (id: string) => string
  /** The gateway clock, Unix ms. */
  now?: () => number
  max?: number
}

export function createKnowledge (opts: KnowledgeOptions): Knowledge {
  const now = opts.now ?? Date.now
  const known = new LRUCache<string, Known>({ max: opts.max ?? DEFAULT_KNOWLEDGE_MAX })
  const clocks = new Map<string, ShardClock>()
  const suspended = new Set<string>()
  let listener: ((id: string, at: number) => void) | undefined

  return {
    learn (id, result, sentAt) {
      const shard = opts.shardOf(id)
      if (suspended.has(shard)) return
      const at = result.now
      const clock = clocks.get(shard)
      if (clock === undefined || at >= clock.at) clocks.set(shard, { lo: at - now(), hi: at - sentAt, at })
      // Anonymous clients are not learned: an address flood would evict the consumers' counts.
      if (id.startsWith(ANONYMOUS_ID_PREFIX)) return
      let entry = known.get(id)
      if (entry === undefined) {
        entry = { minute: 0, day: 0, at: Number.NEGATIVE_INFINITY, bannedUntil: 0, banAt: Number.NEGATIVE_INFINITY }
        known.set(id, entry)
      }
      // Replies may arrive out of Redis's order (late ones): what is newer wins, field by field.
      if (at >= entry.banAt) {
        entry.bannedUntil = result.bannedUntil
        entry.banAt = at
      }
      // decide's answer to a banned consumer does not read its windows (counts 0): only the ban is news.
      if (at < entry.at || (result.outcome === 'key_banned' && result.minute.count === 0 && result.day.count === 0)) return
      entry.minute = result.minute.count
      entry.day = result.day.count
      entry.at = at
      listener?.(id, at)
    },
    get: (id) => known.get(id),
    clock: (shard) => clocks.get(shard),
    suspend (shard) { suspended.add(shard) },
    resume (shard) { suspended.delete(shard) },
    forget (id) { known.delete(id) },
    * entries () { yield * known.entries() },
    onLearn (l) { listener = l }
  }
}
