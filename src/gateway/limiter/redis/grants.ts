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
import { Account, consumeResult, entryOf } from './account.js'
import { BATCH_MAX, createBatcher } from './batcher.js'
import { createCalls, IDLE_MS } from './calls.js'
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
  const shards = createShards({
    ...opts,
    reseed,
    onShardChange (shard, state, reason) {
      opts.onShardChange?.(shard, state, reason)
      if (state === 'up') shardUp(shard) // requests that waited for it ask it now
    }
  })
  const batcher = createBatcher(port, runtime, shards, holder, opts.timeoutMs)
  const allowance = opts.allowance ?? { share: DEFAULT_OUTAGE_ALLOWANCE_PERCENT / 100, processes: DEFAULT_STORE_PROCESSES }
  const { clockOf, up, call, callForWaiting, next, outage, shardUp } = createCalls({ runtime, policy, allowance, shards, batcher, refusalWaitMs: shards.recoveryMs, onBan: (id, until) => { opts.onBan?.(id, until) }, onOutageAdmission: opts.onOutageAdmission })
  let closed = false
  let cancelSweep = runtime.after(SWEEP_MS, function tick () {
    sweep()
    cancelSweep = runtime.after(SWEEP_MS, tick)
  })

  const tableOf = (id: string): Map<string, Account> | LRUCache<string, Account> => id.startsWith(ANONYMOUS_ID_PREFIX) ? anonymous : consumers
  function accountOf (id: string, ask: Ask): Account {
    let account = tableOf(id).get(id)
    if (account === undefined) {
      const key = limiterKey(id)
      account = new Account(id, key, port.shardOf(key))
      tableOf(id).set(id, account)
    }
    return account.configure(ask)
  }

  /** A shard lost its data: what this process admitted there goes back in, its reserve asked again. */
  async function reseed (shard: string): Promise<void> {
    // One call per group (a slot on a Cluster: a script's keys may not span slots), at most BATCH_MAX entries each.
    const groups = new Map<string, Array<{ account: Account, entry: GrantEntry }>>()
    for (const account of [...consumers.values(), ...anonymous.values()]) {
      if (account.shard !== shard) continue
      // Nothing of the old reserve is spent until Redis confirms the new one (its cap 0).
      account.pool.lose()
      const remaining = account.reserve.lose()
      account.allowance.lose()
      const adjustments = account.ledger.adjustments()
      if (adjustments.length === 0 && remaining === 0) continue
      const group = port.groupOf(account.key)
      const members = groups.get(group) ?? []
      if (members.length === 0) groups.set(group, members)
      members.push({ account, entry: entryOf(account, 0, 1, 0, remaining, adjustments) })
      reseeding.add(account)
    }
    try {
      for (const members of groups.values()) {
        for (let offset = 0; offset < members.length; offset += BATCH_MAX) {
          const part = members.slice(offset, offset + BATCH_MAX)
          const entries = part.map((member) => member.entry)
          const sent = runtime.now()
          const { now, replies } = readGrantReply(await port.run(GRANT, grantKeys(entries), grantArgs(holder, entries)), entries.length)
          shards.of(shard).clock.learn(now, sent, runtime.now())
          replies.forEach((reply, index) => { part[index]!.account.reserve.kept(reply.reserve, now) })
        }
      }
    } finally {
      const waited = [...reseeding]
      reseeding.clear()
      for (const account of waited) next(account)
    }
  }

  /** Each second: expired pools become give-backs, idle ids hand their reserve back, old ones are forgotten. A slice a turn. */
  function sweep (accounts = [...consumers.values(), ...anonymous.values()], from = 0): void {
    const localNow = runtime.now()
    for (const account of accounts.slice(from, from + SWEEP_SLICE)) {
      account.pool.expire(clockOf(account), localNow)
      const earliest = clockOf(account).earliest(localNow)
      if (earliest !== undefined) account.ledger.prune(earliest)
      const idle = localNow - account.lastSeen > IDLE_MS
      if (!account.calling && up(account) && (account.pool.owesGiveBack || account.reserve.owesWriteBack || account.allowance.owesWriteBack || (idle && account.reserve.units > 0))) call(account)
      if (localNow - account.lastSeen > FORGET_MS && !account.calling && account.reserve.units === 0 && account.ledger.longWindowsEmpty && tableOf(account.id).get(account.id) === account) tableOf(account.id).delete(account.id)
    }
    if (from + SWEEP_SLICE < accounts.length && !closed) runtime.turnEnd(() => { sweep(accounts, from + SWEEP_SLICE) })
  }

  return {
    consume (id: string, ask: Ask): Promise<ConsumeResult> {
      const account = accountOf(id, ask)
      const localNow = runtime.now()
      const cost = ask.cost
      account.countRequest(localNow)
      if (!account.pool.expire(clockOf(account), localNow) && account.waitingCount === 0 && account.spendPool(cost, clockOf(account), localNow)) {
        return Promise.resolve(consumeResult(account, 'ok', account.redisTimeAt(localNow), 'grant'))
      }
      return new Promise((resolve, reject) => {
        if (!up(account) && !reseeding.has(account)) return outage(account, { cost, resolve, reject, attempts: 0 }, localNow, 'shard not up')
        account.wait({ cost, resolve, reject, attempts: 0 })
        if (up(account) && !account.calling) callForWaiting(account)
      })
    },
    /** Drops what this process holds for `id` (its state in Redis was reset). */
    forget (id: string) { tableOf(id).delete(id) },
    /** True while a shard does not answer or outage admissions are not yet counted in Redis. */
    degraded: () => shards.anyDown() || [...consumers.values(), ...anonymous.values()].some((account) => account.reserve.owesWriteBack || account.allowance.owesWriteBack),
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
