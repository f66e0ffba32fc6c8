// The calls of each id, at most one in flight: requests wait for it unless the pool serves them or
// the shard is down (then STORE_ON_ERROR answers). A call asks for every request waiting, by cost, a
// block for the rest of the second when the id is busy, the reserve it wants, and settles give-backs
// and reserve admissions; its reply fills the pool — even after its budget ran out: it was counted.
import { MINUTE_BUCKET_MS } from '../arithmetic.js'
import * as acct from './account.js'
import { consumeResult, entryOf } from './account.js'
import type { Account, Waiting } from './account.js'
import type { Job } from './batcher.js'
import type { ShardClock } from './clock.js'
import { allowanceUnits, StoreUnavailableError, type OutageAllowance, type StoreOnError } from './outage.js'
import type { Runtime } from './port.js'
import type { GrantEntry, GrantReply } from './scripts.js'
import type { Shards } from './shard.js'

/** A consumer seen this often per second gets a block beyond its waiting requests. */
export const HOT_RATE = 2
/** The reserve asked for: an outage of a minute at the consumer's rate, at most a quarter of the room left (the script shares it further). */
export const RESERVE_SECONDS = 60
/** No reserve unless the room would last this long at the consumer's rate: one racing to its limit would strand it. */
export const RESERVE_SLACK_SECONDS = 10
/** An id unseen this long hands its reserve back. */
export const IDLE_MS = 2_000
/** A refusal waiting for blocks held elsewhere asks again this long after their second ends (their give-back first). */
const GIVE_BACK_MARGIN_MS = 100
/** Calls a request waits for before the outage policy answers it (each reply came too late to spend). */
const MAX_ATTEMPTS = 3

/** What the calls need from the grants around them. */
export interface CallDeps {
  readonly runtime: Runtime
  readonly policy: StoreOnError
  /** Under `local`: the outage allowance (`strict` has none). */
  readonly allowance: OutageAllowance
  readonly shards: Shards
  readonly batcher: { add: (job: Job) => void }
  onBan: (id: string, until: number) => void
  /** A request was admitted while its shard did not answer, from the reserve or the allowance. */
  onOutageAdmission?: ((kind: 'reserve' | 'allowance') => void) | undefined
}

/** The write calls of every id, and what answers a request without one. */
export function createCalls (deps: CallDeps) {
  const { runtime, policy, shards, batcher } = deps
  const reserves = policy === 'local' || policy === 'strict'
  const allowance = policy === 'local' ? deps.allowance : { share: 0, processes: 1 }
  const clockOf = (a: Account): ShardClock => shards.of(a.shard).clock
  const up = (a: Account): boolean => shards.of(a.shard).state === 'up'

  /** Queues `a`'s write call (at most one queued or in flight per id). */
  function call (a: Account): void {
    a.calling = true
    batcher.add(writeJob(a))
  }

  /** Serves waiting requests from a live pool. */
  function drain (a: Account, x: number): void {
    while (a.waiting.length > 0 && a.waiting[0]!.cost <= a.pool && acct.poolLive(a, clockOf(a), x)) {
      const w = a.waiting.shift()!
      acct.spendPool(a, w.cost)
      w.resolve(consumeResult(a, 'ok', a.viewAt + (x - a.viewLocal), 'grant'))
    }
  }

  /** A call ended: what still waits goes on (after `delayMs`, when given). */
  function next (a: Account, delayMs = 0): void {
    if (a.calling) return
    // Nothing waits: a pool just given back goes at once (other processes' refusals may wait for it).
    if (a.waiting.length === 0) { if (a.returns.length > 0 && up(a)) call(a); return }
    if (delayMs > 0) { a.calling = true; runtime.after(delayMs, () => { a.calling = false; next(a) }); return }
    const x = runtime.now()
    drain(a, x)
    if (a.waiting.length === 0) return
    if (up(a)) return call(a)
    for (const w of a.waiting.splice(0)) outage(a, w, x)
  }

  /** The outage policy's answer to `w` at local `x`: the reserve first, then the allowance. */
  function outage (a: Account, w: Waiting, x: number): void {
    if (policy === 'open') return w.resolve(consumeResult({ ...a, view: undefined, pool: 0 }, 'ok', runtime.now(), 'fallback')) // nothing known: the whole limits
    const clock = clockOf(a)
    const units = allowanceUnits(allowance, a.limits.perMinute)
    const kind = !reserves ? undefined
      : acct.spendReserve(a, clock, x, w.cost) ? 'reserve'
        : acct.spendAllowance(a, clock, x, w.cost, units, units * allowance.processes) ? 'allowance' : undefined
    if (kind === undefined) return w.reject(new StoreUnavailableError(`limiter store ${up(a) ? 'did not answer in time' : 'unavailable'}`))
    deps.onOutageAdmission?.(kind)
    w.resolve(consumeResult(a, 'ok', clock.latest(x) ?? x, 'fallback', 0, undefined, outageRemaining(a, x, units), kind))
  }

  /** What this process may still admit for `a` while its shard does not answer: its reserve left and its allowance left. */
  function outageRemaining (a: Account, x: number, units: number): number {
    const reserveLeft = Math.max(0, (a.reserveCap ?? a.reserve) - acct.unwrittenUnits(a))
    return reserveLeft + acct.allowanceLeft(a, x, units, units * allowance.processes)
  }

  /** The reserve for `a`: only when busy in its last second seen and the one before (a lone burst races for the whole window). */
  function reserveWant (a: Account, x: number): number {
    if (!reserves || x - a.lastSeen > IDLE_MS || a.seenBefore === 0) return 0
    const r = acct.rate(a, Math.min(x, a.second * 1000 + 999)) // a give-back at the second's end keeps it
    const room = acct.roomSeen(a)
    if (r < HOT_RATE || room < r * RESERVE_SLACK_SECONDS) return 0
    return Math.min(Math.ceil(r * RESERVE_SECONDS), Math.floor(room / 4))
  }

  function extraWant (a: Account, x: number, waiting: number): number {
    const r = acct.rate(a, x)
    if (r < HOT_RATE) return 0
    const latest = clockOf(a).latest(x) ?? x
    const left = (Math.floor(latest / MINUTE_BUCKET_MS) + 1) * MINUTE_BUCKET_MS - latest
    return Math.max(0, Math.min(a.limits.perMinute, Math.ceil(r * left / 1000)) - waiting)
  }

  // One entry's reply: its units join the pool, its requests are admitted from it or rejected. Units too late for
  // their bucket are given back; their requests ask again after it (the delay returned).
  function answer (a: Account, r: GrantReply, group: Waiting[], redisNow: number, received: number, answered: boolean): number {
    if (r.bannedAt > 0) deps.onBan(a.id, r.bannedUntil)
    if (r.outcome === 'key_banned') {
      if (!answered) for (const w of group) w.resolve(consumeResult(a, 'key_banned', redisNow, 'store', r.bannedUntil))
      return 0
    }
    const cost = group[0]?.cost ?? 1
    acct.fillPool(a, r.admitted * cost + r.extra, r.extra, redisNow)
    if (r.extra > 0) giveBackAtBucketEnd(a)
    if (answered) return 0
    const live = acct.poolLive(a, clockOf(a), received)
    const retry: Waiting[] = []
    // Blocks other processes hold come back when this second ends: that many first refusals ask again then (limiter-internals.md).
    let pooledElsewhere = r.bannedAt === 0 ? r.pooled : 0
    let margin = 1 // after the bucket ends; a refusal waiting for blocks also gives their holders time to give back
    group.forEach((w, k) => {
      if (k < r.admitted) {
        if (live) {
          acct.spendPool(a, w.cost)
          w.resolve(consumeResult(a, 'ok', redisNow, 'store'))
        } else if (++w.attempts < MAX_ATTEMPTS) {
          retry.push(w)
        } else {
          outage(a, w, received)
        }
        return
      }
      if (w.attempts === 0 && pooledElsewhere >= w.cost) {
        pooledElsewhere -= w.cost
        margin = GIVE_BACK_MARGIN_MS
        w.attempts++
        retry.push(w)
        return
      }
      // The 429 that crossed the threshold starts the ban; those after it find the ban in force.
      const nth = k - r.admitted + 1
      const outcome = r.bannedAt === 0 || nth < r.bannedAt ? 'rate_limited' : nth === r.bannedAt ? 'ban_started' : 'key_banned'
      w.resolve(consumeResult(a, outcome, redisNow, 'store', outcome === 'rate_limited' ? 0 : r.bannedUntil))
    })
    a.waiting.unshift(...retry)
    if (retry.length === 0) return 0
    const earliest = clockOf(a).earliest(received) ?? received
    return Math.min(MINUTE_BUCKET_MS + margin, Math.max(1, (a.bucket + 1) * MINUTE_BUCKET_MS - earliest + margin))
  }

  /** When `a`'s pool can no longer be spent, what is left of it goes back at once (others may wait for it). */
  function giveBackAtBucketEnd (a: Account): void {
    if (a.giveBack) return
    a.giveBack = true
    runtime.after(Math.max(1, (a.bucket + 1) * MINUTE_BUCKET_MS - acct.SPEND_MARGIN_MS - (clockOf(a).latest(runtime.now()) ?? runtime.now())), () => {
      a.giveBack = false
      acct.expirePool(a, clockOf(a), runtime.now())
      if (a.pool > 0) giveBackAtBucketEnd(a) // the clock's bounds say not yet, or a new block came
      next(a)
    })
  }

  /** The job of one write call for `a`, built at its turn's end with everything then waiting. */
  function writeJob (a: Account): Job {
    let groups: Waiting[][] = []
    let sent: GrantEntry['adjustments'] = []
    let sentAllowance: GrantEntry['adjustments'] = []
    let timedOut = false
    return {
      key: a.key,
      build () {
        const x = runtime.now()
        acct.expirePool(a, clockOf(a), x)
        drain(a, x)
        groups = []
        for (const w of a.waiting.splice(0)) {
          const group = groups.find((g) => g[0]!.cost === w.cost)
          if (group === undefined) groups.push([w])
          else group.push(w)
        }
        const want = reserveWant(a, x)
        sent = a.unwritten.slice()
        sentAllowance = a.allowanceUnwritten.slice()
        const adjustments = [...a.returns, ...sent, ...sentAllowance]
        a.returns = [] // a give-back is sent once: twice could uncount a request that was admitted
        if (groups.length === 0 && adjustments.length === 0 && want >= a.reserve) return []
        // Applied or not, reserve admissions stay within min(reserve, what this call writes back + want).
        a.reserveCap = Math.min(a.reserve, acct.unwrittenUnits(a) + want)
        const waiting = groups.reduce((n, g) => n + g.length, 0)
        const first = groups[0]
        const entries = [entryOf(a, first?.length ?? 0, first?.[0]!.cost ?? 1, waiting > 0 ? extraWant(a, x, waiting) : 0, want, adjustments)]
        for (const g of groups.slice(1)) entries.push(entryOf(a, g.length, g[0]!.cost, 0, want, []))
        return entries
      },
      replied (replies, info) {
        a.calling = false
        if (info !== undefined && replies.length > 0) {
          const clock = clockOf(a)
          clock.learn(info.redisNow, info.sent, info.received)
          const last = replies[replies.length - 1]!
          Object.assign(a, { view: last, viewAt: info.redisNow, viewLocal: info.received, reserve: last.reserve, reserveUntil: info.redisNow + acct.RESERVE_TTL_MS, reserveCap: undefined })
          a.unwritten = sent.reduce((list, s) => acct.addAdjustment(list, { ...s, delta: -s.delta }), a.unwritten)
          a.allowanceUnwritten = sentAllowance.reduce((list, s) => acct.addAdjustment(list, { ...s, delta: -s.delta }), a.allowanceUnwritten)
          let delay = 0
          replies.forEach((r, i) => { delay = Math.max(delay, answer(a, r, groups[i] ?? [], info.redisNow, info.received, timedOut)) })
          acct.expirePool(a, clock, runtime.now())
          next(a, delay)
          return
        }
        next(a)
      },
      timedOut () {
        // The shard is down now: what this call carried and what waited for its reply are answered
        // by the outage policy (its reply, if it comes, still fills the pool).
        timedOut = true
        const x = runtime.now()
        for (const w of [...groups.flat(), ...a.waiting.splice(0)]) outage(a, w, x)
      },
      failed () {
        // Whether Redis ran it is unknown: the reserve is held to the cap that holds either way, the
        // reserve admissions it carried are sent again (counted twice at worst), its give-backs are not.
        Object.assign(a, { calling: false, reserve: a.reserveCap ?? a.reserve, reserveCap: undefined })
        if (!timedOut) {
          const x = runtime.now()
          for (const w of groups.flat()) outage(a, w, x)
        }
        next(a)
      }
    }
  }

  return { clockOf, up, call, drain, next, outage }
}
