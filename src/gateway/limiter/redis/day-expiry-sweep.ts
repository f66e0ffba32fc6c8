// A one-off repair for a shared Redis that ran grant.lua from before every call set the expiry of each key it
// wrote: day hashes (`rl:{id}:d`) left without one, one per consumer that never came back, kept forever. Walks
// the keyspace with SCAN (pages of `pageSize`, a pause between pages, on every master of a Cluster: never KEYS,
// never a long command in front of the decisions) and runs lua/day-expiry.lua on each day hash, which gives one
// without an expiry its limiter hash's (the script's rule: both keys expire at x), or a day from now when the
// limiter hash is gone. Nothing is deleted; a hash with an expiry is left as it is. `petstore-gateway store
// expire-leaked` runs it.
import { Cluster, type Redis } from 'ioredis'
import type { RedisClient } from '../../redis/connection.js'
import { KEY_PREFIX } from '../../redis/keys.js'
import { DAY_EXPIRY } from './scripts.js'

export const DEFAULT_SWEEP_PAGE_SIZE = 200
export const DEFAULT_SWEEP_PAUSE_MS = 10
/** Day hashes only: `rl:{id}:d` (a consumer id holds no `}`, so nothing else matches). */
const DAY_HASH_PATTERN = `${KEY_PREFIX}{*}:d`

export interface DayExpirySweepOptions {
  /** Report what would change, change nothing. */
  readonly dryRun?: boolean
  readonly pageSize?: number
  readonly pauseMs?: number
}

export interface DayExpirySweepReport {
  /** Day hashes looked at. */
  readonly dayHashes: number
  /** Without an expiry, given (dry run: would get) their limiter hash's. */
  readonly paired: number
  /** Without an expiry and without a limiter hash's: given a day from now. */
  readonly orphaned: number
}

type DayExpiryCommand = (dayKey: string, limiterKey: string, dryRun: string) => Promise<number>

function mastersOf (client: RedisClient): Redis[] {
  return client instanceof Cluster ? client.nodes('master') : [client]
}

export async function sweepDayExpiry (client: RedisClient, opts: DayExpirySweepOptions = {}): Promise<DayExpirySweepReport> {
  const pageSize = opts.pageSize ?? DEFAULT_SWEEP_PAGE_SIZE
  const pauseMs = opts.pauseMs ?? DEFAULT_SWEEP_PAUSE_MS
  client.defineCommand('petstoreDayExpiry', { numberOfKeys: 2, lua: DAY_EXPIRY.lua })
  const fix = (client as unknown as Record<'petstoreDayExpiry', DayExpiryCommand>).petstoreDayExpiry.bind(client)
  const counts = { dayHashes: 0, paired: 0, orphaned: 0 }
  for (const master of mastersOf(client)) {
    let cursor = '0'
    do {
      const [next, keys] = await master.scan(cursor, 'MATCH', DAY_HASH_PATTERN, 'COUNT', pageSize, 'TYPE', 'hash')
      cursor = next
      for (const dayKey of keys) {
        counts.dayHashes++
        const outcome = await fix(dayKey, dayKey.slice(0, -':d'.length), opts.dryRun === true ? '1' : '0')
        if (outcome === 1) counts.paired++
        else if (outcome === 2) counts.orphaned++
      }
      if (cursor !== '0' && pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs))
    } while (cursor !== '0')
  }
  return counts
}
