// Count before admit: the Redis path's decisions. A request is admitted only by spending units Redis
// has already counted for this process — held from an earlier call (the pool), or counted by the
// call it waited for — or, while its shard does not answer, by the STORE_ON_ERROR policy
// (outage.ts; `local` spends the reserve Redis keeps back for this process). A reply that arrives
// late was still counted: its units are spent by later requests or given back, so a slow Redis
// costs latency or an under-admission, never an over-admission. One call per id is in flight at a
// time (calls.ts); requests arriving meanwhile wait for the next, which leaves with the turn's
// batch (batcher.ts). docs/limiter-internals.md states the invariant and proves the bound.
import { LRUCache } from 'lru-cache'
import { limiterKey } from '../../redis/keys.js'
import { ANONYMOUS_PREFIX } from '../consumer-id.js'
import type { Ask, ConsumeResult } from '../store.js'
import * as acct from './account.js'
import type { Account, Waiting } from './account.js'
import { createBatcher } from './batcher.js'
import type { ShardClock } from './clock.js'
import { entryOf, IDLE_MS, writeJob, type CallContext } from './calls.js'
import { StoreUnavailableError, type StoreOnError } from './outage.js'
import type { RedisPort, Runtime } from './port.js'
import { consumeResult, emptyResult } from './results.js'
import { GRANT, grantArgs, grantKeys, readGrantReply, type GrantEntry } from './scripts.js'
import { createShards, type ShardState } from './shard.js'

export const SWEEP_MS = 1_000
/** ANONYMOUS_STATE_MAX: anonymous clients whose grants and ledger a process keeps. */
export const DEFAULT_ANONYMOUS_ACCOUNTS = 100_000
/** An id unseen this long, holding nothing, is forgotten (its ledger has left every window). */
const FORGET_MS = 25 * 3_600_000

export interface GrantsOptions {
  port: RedisPort
  runtime: Runtime
  holder: string
  timeoutMs: number
  policy: StoreOnError
  barrierMs?: number | undefined
  anonymousMax?: number | undefined
  onShardChange?: (shard: string, state: ShardState, reason: string) => void
  /** A reply said a ban started. */
  onBan?: (id: string, until: number) => void
}

export interface Grants {
  consume: (id: string, ask: Ask) => Promise<ConsumeResult>
  /** Drops what this process holds for `id` (its state in Redis was reset). */
  forget: (id: string) => void
  /** True while a shard does not answer or reserve admissions are not yet counted in Redis. */
  degraded: () => boolean
  /** Resolves once every shard known is up, or after `ms`. */
  settled: (ms: number) => Promise<void>
  close: () => Promise<void>
}

export function createGrants (opts: GrantsOptions): Grants {
  const { port, runtime, holder, policy } = opts
  const consumers = new Map<string, Account>()
  const anonymous = new LRUCache<string, Account>({ max: opts.anonymousMax ?? DEFAULT_ANONYMOUS_ACCOUNTS })
  /** Ids whose re-seed is in flight: their requests wait for it (what the reserve is then is unknown). */
  const reseeding = new Set<Account>()
  const shards = createShards({ port, runtime, timeoutMs: opts.timeoutMs, barrierMs: opts.barrierMs, reseed, onChange: opts.onShardChange })
  const batcher = createBatcher(port, runtime, shards, holder, opts.timeoutMs)
  let cancelSweep = runtime.after(SWEEP_MS, function tick () {
    sweep()
    cancelSweep = runtime.after(SWEEP_MS, tick)
  })

  const clockOf = (a: Account): ShardClock => shards.of(a.shard).clock
  const up = (a: Account): boolean => shards.of(a.shard).state === 'up'

  function accountOf (id: string, ask: Ask): Account {
    const table = id.startsWith(ANONYMOUS_PREFIX) ? anonymous : consumers
    let a = table.get(id)
    if (a === undefined) {
      const key = limiterKey(id)
      a = acct.newAccount(id, key, port.shardOf(key))
      table.set(id, a)
    }
    a.limits = ask.limits
    a.ban = ask.ban
    a.monthLimit = ask.monthLimit
    a.monthSoft = ask.overage
    return a
  }

  /** The outage policy's answer to a request of `cost` at local `x`. */
  function outageAnswer (a: Account, cost: number, x: number): ConsumeResult {
    if (policy === 'open') return emptyResult(a, runtime.now(), 'fallback')
    if (policy === 'local' && acct.spendReserve(a, clockOf(a), x, cost)) return consumeResult(a, 'ok', clockOf(a).latest(x) ?? x, 'fallback')
    throw new StoreUnavailableError(`limiter store ${up(a) ? 'did not answer in time' : 'unavailable'}`)
  }

  const ctx: CallContext = {
    runtime,
    reserves: policy === 'local',
    clockOf,
    drain (a, x) {
      const clock = clockOf(a)
      while (a.waiting.length > 0 && a.waiting[0]!.cost <= a.pool && acct.poolLive(a, clock, x)) {
        const w = a.waiting.shift()!
        acct.spendPool(a, w.cost)
        w.resolve(consumeResult(a, 'ok', a.viewAt + (x - a.viewLocal), 'grant'))
      }
    },
    next (a, delayMs = 0) {
      if (a.calling || a.waiting.length === 0) return
      if (delayMs > 0) {
        a.calling = true
        runtime.after(delayMs, () => {
          a.calling = false
          ctx.next(a)
        })
        return
      }
      const x = runtime.now()
      ctx.drain(a, x)
      if (a.waiting.length === 0) return
      if (up(a)) {
        a.calling = true
        batcher.add(writeJob(ctx, a))
        return
      }
      for (const w of a.waiting.splice(0)) ctx.outage(a, w, x)
    },
    outage (a, w: Waiting, x) {
      try {
        w.resolve(outageAnswer(a, w.cost, x))
      } catch (err) {
        w.reject(err as Error)
      }
    },
    onBan: (id, until) => { opts.onBan?.(id, until) }
  }

  /** A shard lost its data: what this process admitted there goes back in, its reserve asked again. */
  async function reseed (shard: string): Promise<void> {
    try {
      await reseedShard(shard)
    } finally {
      const waited = [...reseeding]
      reseeding.clear()
      for (const a of waited) ctx.next(a)
    }
  }

  async function reseedShard (shard: string): Promise<void> {
    const entries: GrantEntry[] = []
    const owners: Account[] = []
    for (const a of [...consumers.values(), ...anonymous.values()]) {
      if (a.shard !== shard) continue
      const remaining = Math.max(0, a.reserve - acct.unwrittenUnits(a))
      a.pool = 0
      a.returns = []
      a.unwritten = []
      a.reserve = 0
      a.reserveCap = 0
      const adjustments = acct.ledgerAdjustments(a)
      if (adjustments.length === 0 && remaining === 0) continue
      entries.push(entryOf(a, 0, 1, 0, remaining, adjustments))
      owners.push(a)
      reseeding.add(a)
    }
    for (let i = 0; i < entries.length; i += 100) {
      const part = entries.slice(i, i + 100)
      const sent = runtime.now()
      const { now, replies } = readGrantReply(await port.run(GRANT, grantKeys(part), grantArgs(holder, part)), part.length)
      shards.of(shard).clock.learn(now, sent, runtime.now())
      replies.forEach((r, j) => {
        const a = owners[i + j]!
        a.reserve = r.reserve
        a.reserveUntil = now + acct.RESERVE_TTL_MS
        a.reserveCap = undefined
      })
    }
  }

  /** Each second: expired pools become give-backs, idle ids hand their reserve back, old ones are forgotten. */
  function sweep (): void {
    const x = runtime.now()
    for (const table of [consumers, anonymous]) {
      for (const [id, a] of table.entries()) {
        acct.expirePool(a, clockOf(a), x)
        const idle = x - a.lastSeen > IDLE_MS
        if (!a.calling && up(a) && (a.returns.length > 0 || a.unwritten.length > 0 || (idle && a.reserve > 0))) {
          a.calling = true
          batcher.add(writeJob(ctx, a))
        }
        if (x - a.lastSeen > FORGET_MS && !a.calling && a.reserve === 0 && a.ledger.day.size === 0) table.delete(id)
      }
    }
  }

  return {
    consume (id, ask) {
      const a = accountOf(id, ask)
      const x = runtime.now()
      const cost = ask.cost
      acct.countRequest(a, x)
      acct.expirePool(a, clockOf(a), x)
      if (a.waiting.length === 0 && a.pool >= cost && acct.poolLive(a, clockOf(a), x)) {
        acct.spendPool(a, cost)
        return Promise.resolve(consumeResult(a, 'ok', a.viewAt + (x - a.viewLocal), 'grant'))
      }
      if (!up(a) && !reseeding.has(a)) {
        try {
          return Promise.resolve(outageAnswer(a, cost, x))
        } catch (err) {
          return Promise.reject(err as Error)
        }
      }
      return new Promise((resolve, reject) => {
        a.waiting.push({ cost, resolve, reject, attempts: 0 })
        if (up(a) && !a.calling) {
          a.calling = true
          batcher.add(writeJob(ctx, a))
        }
      })
    },
    forget (id) {
      consumers.delete(id)
      anonymous.delete(id)
    },
    degraded: () => shards.anyDown() || [...consumers.values(), ...anonymous.values()].some((a) => a.unwritten.length > 0),
    async settled (ms) {
      for (const name of port.shards()) shards.of(name)
      await shards.settled(ms)
    },
    async close () {
      cancelSweep()
      shards.close()
    }
  }
}
