// Count before admit: the Redis path's decisions. A request is admitted only by spending units Redis has already
// counted for this process — held from an earlier call (the pool), or counted by the call it waited for — or, while
// its shard does not answer, by the STORE_ON_ERROR policy (outage.ts; `local` spends the reserve Redis keeps back for
// this process). A reply that arrives late was still counted: its units are spent by later requests or given back, so
// a slow Redis costs latency or an under-admission, never an over-admission. One call per id is in flight at a time
// (calls.ts); requests arriving meanwhile wait for the next, which leaves with the turn's batch (batcher.ts).
// docs/limiter-internals.md states the invariant and proves the bound.
import { LRUCache } from 'lru-cache'
import { limiterKey } from '../../redis/keys.js'
import { ANONYMOUS_ID_PREFIX } from '../../edge/client-address.js'
import type { Ask, ConsumeResult } from '../store.js'
import * as acct from './account.js'
import { consumeResult, entryOf, type Account } from './account.js'
import { BATCH_MAX, createBatcher } from './batcher.js'
import { createCalls, IDLE_MS } from './calls.js'
import { RESERVE_TTL_MS } from './layout.js'
import { DEFAULT_OUTAGE_ALLOWANCE_PERCENT, DEFAULT_STORE_PROCESSES, type OutageAllowance, type StoreOnError } from './outage.js'
import { GRANT, grantArgs, grantKeys, readGrantReply, type GrantEntry } from './scripts.js'
import { createShards, type ShardOptions } from './shard.js'

export const SWEEP_MS = 1_000
/** Accounts swept per event-loop turn: 10,000 at once held the loop 2–16 ms every second (the p99 of a long tail). */
export const SWEEP_SLICE = 500
/** ANONYMOUS_STATE_MAX: anonymous clients whose grants and ledger a process keeps. */
export const DEFAULT_ANONYMOUS_ACCOUNTS = 100_000
/** An id unseen this long, holding nothing, is forgotten (its ledger has left every window). */
const FORGET_MS = 25 * 3_600_000

export interface GrantsOptions extends Omit<ShardOptions, 'reseed'> {
  /** This process's name in Redis (its reserves). */
  holder: string
  policy: StoreOnError
  /** Under `local`, the outage allowance (default: DEFAULT_OUTAGE_ALLOWANCE_PERCENT of a limit, one process). */
  allowance?: OutageAllowance | undefined
  anonymousMax?: number | undefined
  /** A reply said a ban started. */
  onBan?: (id: string, until: number) => void
  /** A request was admitted while its shard did not answer, from the reserve or the allowance. */
  onOutageAdmission?: ((kind: 'reserve' | 'allowance') => void) | undefined
}

export type Grants = ReturnType<typeof createGrants>

export function createGrants (opts: GrantsOptions) {
  const { port, runtime, holder, policy } = opts
  const consumers = new Map<string, Account>()
  const anonymous = new LRUCache<string, Account>({ max: opts.anonymousMax ?? DEFAULT_ANONYMOUS_ACCOUNTS })
  /** Ids whose re-seed is in flight: their requests wait for it (what the reserve is then is unknown). */
  const reseeding = new Set<Account>()
  const shards = createShards({ ...opts, reseed })
  const batcher = createBatcher(port, runtime, shards, holder, opts.timeoutMs)
  const allowance = opts.allowance ?? { share: DEFAULT_OUTAGE_ALLOWANCE_PERCENT / 100, processes: DEFAULT_STORE_PROCESSES }
  const { clockOf, up, call, next, outage } = createCalls({ runtime, policy, allowance, shards, batcher, onBan: (id, until) => { opts.onBan?.(id, until) }, onOutageAdmission: opts.onOutageAdmission })
  let closed = false
  let cancelSweep = runtime.after(SWEEP_MS, function tick () {
    sweep()
    cancelSweep = runtime.after(SWEEP_MS, tick)
  })

  const tableOf = (id: string): Map<string, Account> | LRUCache<string, Account> => id.startsWith(ANONYMOUS_ID_PREFIX) ? anonymous : consumers
  function accountOf (id: string, ask: Ask): Account {
    let a = tableOf(id).get(id)
    if (a === undefined) {
      const key = limiterKey(id)
      a = new acct.Account(id, key, port.shardOf(key))
      tableOf(id).set(id, a)
    }
    a.limits = ask.limits
    a.ban = ask.ban
    a.monthLimit = ask.monthLimit
    a.monthSoft = ask.overage
    return a
  }

  /** A shard lost its data: what this process admitted there goes back in, its reserve asked again. */
  async function reseed (shard: string): Promise<void> {
    const owners: Account[] = []
    const all: GrantEntry[] = []
    for (const a of [...consumers.values(), ...anonymous.values()]) {
      if (a.shard !== shard) continue
      const remaining = Math.max(0, a.reserve - acct.unwrittenUnits(a))
      // Nothing of the old reserve is spent until Redis confirms the new one (reserveCap 0).
      Object.assign(a, { pool: 0, returns: [], unwritten: [], allowanceUnwritten: [], reserve: 0, reserveCap: 0 })
      const adjustments = acct.ledgerAdjustments(a)
      if (adjustments.length === 0 && remaining === 0) continue
      all.push(entryOf(a, 0, 1, 0, remaining, adjustments))
      owners.push(a)
      reseeding.add(a)
    }
    try {
      for (let i = 0; i < all.length; i += BATCH_MAX) {
        const part = owners.slice(i, i + BATCH_MAX)
        const entries = all.slice(i, i + BATCH_MAX)
        const sent = runtime.now()
        const { now, replies } = readGrantReply(await port.run(GRANT, grantKeys(entries), grantArgs(holder, entries)), entries.length)
        shards.of(shard).clock.learn(now, sent, runtime.now())
        replies.forEach((r, j) => { Object.assign(part[j]!, { reserve: r.reserve, reserveUntil: now + RESERVE_TTL_MS, reserveCap: undefined }) })
      }
    } finally {
      const waited = [...reseeding]
      reseeding.clear()
      for (const a of waited) next(a)
    }
  }

  /** Each second: expired pools become give-backs, idle ids hand their reserve back, old ones are forgotten. A slice a turn. */
  function sweep (accounts = [...consumers.values(), ...anonymous.values()], from = 0): void {
    const x = runtime.now()
    for (const a of accounts.slice(from, from + SWEEP_SLICE)) {
      acct.expirePool(a, clockOf(a), x)
      const earliest = clockOf(a).earliest(x)
      if (earliest !== undefined) acct.pruneLedger(a, earliest)
      const idle = x - a.lastSeen > IDLE_MS
      if (!a.calling && up(a) && (a.returns.length > 0 || a.unwritten.length > 0 || a.allowanceUnwritten.length > 0 || (idle && a.reserve > 0))) call(a)
      if (x - a.lastSeen > FORGET_MS && !a.calling && a.reserve === 0 && a.ledger.day.size + a.ledger.month.size === 0 && tableOf(a.id).get(a.id) === a) tableOf(a.id).delete(a.id)
    }
    if (from + SWEEP_SLICE < accounts.length && !closed) runtime.turnEnd(() => { sweep(accounts, from + SWEEP_SLICE) })
  }

  return {
    consume (id: string, ask: Ask): Promise<ConsumeResult> {
      const a = accountOf(id, ask)
      const x = runtime.now()
      const cost = ask.cost
      acct.countRequest(a, x)
      if (!acct.expirePool(a, clockOf(a), x) && a.waiting.length === 0 && a.pool >= cost) {
        acct.spendPool(a, cost)
        return Promise.resolve(consumeResult(a, 'ok', a.viewAt + (x - a.viewLocal), 'grant'))
      }
      return new Promise((resolve, reject) => {
        if (!up(a) && !reseeding.has(a)) return outage(a, { cost, resolve, reject, attempts: 0, blockWaits: 0 }, x)
        a.waiting.push({ cost, resolve, reject, attempts: 0, blockWaits: 0 })
        if (up(a) && !a.calling) call(a)
      })
    },
    /** Drops what this process holds for `id` (its state in Redis was reset). */
    forget (id: string) { tableOf(id).delete(id) },
    /** True while a shard does not answer or outage admissions are not yet counted in Redis. */
    degraded: () => shards.anyDown() || [...consumers.values(), ...anonymous.values()].some((a) => a.unwritten.length > 0 || a.allowanceUnwritten.length > 0),
    /** Resolves once every shard known is up, or after `ms`. */
    async settled (ms: number) {
      for (const name of port.shards()) shards.of(name)
      await shards.settled(ms)
    },
    close () {
      closed = true
      cancelSweep()
      shards.close()
    }
  }
}
