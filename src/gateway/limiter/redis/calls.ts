// The calls of each id, at most one in flight: requests wait for it unless the pool serves them or
// the shard is down (then STORE_ON_ERROR answers). A call asks for every request waiting, by cost, a
// block for the rest of the second when the id is busy, the reserve it wants, and settles give-backs
// and reserve admissions; its reply fills the pool — even after its budget ran out: it was counted.
import { MINUTE_BUCKET_MS } from '../arithmetic.js'
import * as accounts from './account.js'
import { consumeResult, entryOf, unknownResult } from './account.js'
import type { Account, Waiting } from './account.js'
import type { Job } from './batcher.js'
import type { ShardClock } from './clock.js'
import { BLOCK_HELD_BUCKETS, RESERVE_SLACK_SECONDS } from './layout.js'
import { SPEND_MARGIN_MS } from './pool.js'
import { allowanceUnits, StoreUnavailableError, type OutageAllowance, type StoreOnError } from './outage.js'
import type { Runtime } from './port.js'
import type { GrantEntry, GrantReply } from './scripts.js'
import type { Shards } from './shard.js'

/** A consumer seen this often per second gets a block beyond its waiting requests. */
export const HOT_RATE = 2
/** The reserve asked for: an outage of a minute at the consumer's rate, at most a quarter of the room left (the script shares it further). */
export const RESERVE_SECONDS = 60
/** An id unseen this long hands its reserve back. */
export const IDLE_MS = 2_000
/** A refusal waiting for blocks held elsewhere asks again this long after their second ends (their give-back first). */
const GIVE_BACK_MARGIN_MS = 100
/** Calls a request waits for before the outage policy answers it (each reply came too late to spend). */
const MAX_ATTEMPTS = 3
/** A call for waiting requests is held at most this long for its minute bucket's end (holdMs). */
const MAX_HOLD_MS = 10

/** What the calls need from the grants around them. */
export interface CallDeps {
  readonly runtime: Runtime
  readonly policy: StoreOnError
  /** Under `local`: the outage allowance (`strict` has none). */
  readonly allowance: OutageAllowance
  readonly shards: Shards
  readonly batcher: { add: (job: Job) => void }
  /**
   * Under `local` and `strict`: how long a request nothing admits while its shard does not answer waits for the shard
   * to answer again before it is refused (the budget of a probe or an epoch read, shard.ts: the larger of
   * STORE_TIMEOUT_MS and half the recovery barrier, 1 s by default); answered again in time, it asks Redis.
   */
  readonly refusalWaitMs: number
  onBan: (id: string, until: number) => void
  /** A request was admitted while its shard did not answer, from the reserve or the allowance. */
  onOutageAdmission?: ((kind: 'reserve' | 'allowance') => void) | undefined
}

/** A request waiting for its shard to answer again before it is refused; `cancel` stops its refusal's timer. */
interface Parked { readonly account: Account, readonly request: Waiting, readonly cancel: () => void }

/** The write calls of every id, and what answers a request without one. */
export function createCalls (deps: CallDeps) {
  const { runtime, policy, shards, batcher } = deps
  const reserves = policy === 'local' || policy === 'strict'
  const allowance = policy === 'local' ? deps.allowance : { share: 0, processes: 1 }
  /** Requests refused for now, waiting for their shard to answer again (refuse), by shard. */
  const parked = new Map<string, Set<Parked>>()
  const clockOf = (account: Account): ShardClock => shards.of(account.shard).clock
  const up = (account: Account): boolean => shards.of(account.shard).state === 'up'

  /** Queues `account`'s write call (at most one queued or in flight per id). */
  function call (account: Account): void {
    account.callStarted()
    batcher.add(writeJob(account))
  }

  /**
   * Local ms to hold a call for waiting requests so that it reaches Redis in the next minute bucket; 0: send it now. A
   * reply read once the latest Redis time is within SPEND_MARGIN_MS of its bucket's end is too late to spend: its units
   * go back and its requests ask again in the next bucket — two round trips, and counted one bucket late while the
   * next request's first call is decided, so a consumer steady at its limit whose requests reach Redis in a second's
   * last milliseconds was refused twice per 61 s where the in-process ring refuses once (steady seed 270582462: 258 of
   * 300 asked twice, 292 admitted against the ring's 296). Held while the latest Redis time plus the clock's width
   * (about a round trip) reaches that margin, until the earliest is past the bucket's end — never longer than
   * MAX_HOLD_MS (a clock that wide sends at once, as before).
   */
  function holdMs (account: Account, localNow: number): number {
    const clock = clockOf(account)
    const latest = clock.latest(localNow)
    const earliest = clock.earliest(localNow)
    if (latest === undefined || earliest === undefined) return 0
    const bucketEnd = (Math.floor(latest / MINUTE_BUCKET_MS) + 1) * MINUTE_BUCKET_MS
    if (latest + (latest - earliest) < bucketEnd - SPEND_MARGIN_MS) return 0
    const hold = Math.ceil(bucketEnd - earliest) + 1
    return hold <= MAX_HOLD_MS ? hold : 0
  }

  /** Queues `account`'s call for its waiting requests, held first for its bucket's end when holdMs says so. */
  function callForWaiting (account: Account): void {
    const hold = holdMs(account, runtime.now())
    if (hold === 0) return call(account)
    account.callStarted()
    runtime.after(hold, () => { account.callEnded(); next(account) })
  }

  /** Serves waiting requests from a live pool. */
  function drain (account: Account, localNow: number): void {
    for (let request = account.servedFromPool(clockOf(account), localNow); request !== undefined; request = account.servedFromPool(clockOf(account), localNow)) {
      request.resolve(consumeResult(account, 'ok', account.redisTimeAt(localNow), 'grant'))
    }
  }

  /** A call ended: what still waits goes on (after `delayMs`, when given). */
  function next (account: Account, delayMs = 0): void {
    if (account.calling) return
    // Nothing waits: a pool just given back goes at once (other processes' refusals may wait for it).
    if (account.waitingCount === 0) { if (account.pool.owesGiveBack && up(account)) call(account); return }
    if (delayMs > 0) { account.callStarted(); runtime.after(delayMs, () => { account.callEnded(); next(account) }); return }
    const localNow = runtime.now()
    drain(account, localNow)
    if (account.waitingCount === 0) return
    if (up(account)) return callForWaiting(account)
    for (const request of account.takeWaiting()) outage(account, request, localNow, 'shard down while it waited')
  }

  /** The outage policy's answer to `request` at local `localNow` (`why`: what sent it there): the reserve first, then the allowance. */
  function outage (account: Account, request: Waiting, localNow: number, why: string): void {
    if (policy === 'open') return request.resolve(unknownResult(account, runtime.now())) // nothing known: the whole limits
    const clock = clockOf(account)
    const units = allowanceUnits(allowance, account.limits.perMinute)
    const kind = !reserves ? undefined
      : accounts.spendReserve(account, clock, localNow, request.cost) ? 'reserve'
        : accounts.spendAllowance(account, clock, localNow, request.cost, units, units * allowance.processes) ? 'allowance' : undefined
    if (kind === undefined) return refuse(account, request, localNow, why, units)
    deps.onOutageAdmission?.(kind)
    request.resolve(consumeResult(account, 'ok', clock.latest(localNow) ?? localNow, 'fallback', 0, undefined, outageRemaining(account, localNow, units), kind))
  }

  /**
   * A request the outage policy cannot admit. Under `local` and `strict` it waits for its shard to answer again, at most
   * refusalWaitMs from the first time it got here: the shard is `up` again (shardUp) — it asks Redis like any other —
   * or the wait is over — refused, 503. Between Redis answering again and this process knowing it (the late reply of a
   * call given up, a probe, the epoch read: a few round trips) its requests were refused for an outage already over:
   * after a 60 s freeze, the busiest consumers, their reserve and allowance spent, got 503s in the first milliseconds
   * after the thaw (bench/results/outage-tail.md, 29 Nov: 2 of 600; 9–20 ms on a quiet machine, up to 300 ms at load 14,
   * hence a wait as long as a recovery's budget, not a call's). Only Redis decides a request that waited: no
   * admission without its units counted, so the bounds are those of the policy (docs/limiter-internals.md).
   * A request resumed by shardUp asks Redis; if that call is given up too, it waits again, refusalWaitMs from then,
   * for that call's late reply (answer: what Redis admitted of it asks again as waited) — once: resumed a second time
   * it keeps that wait's start, so it is answered within two waits and the calls around them (ban-recover seeds 1356,
   * 1319894947: refused at once before, the units Redis had counted for them stranded while a ban began).
   */
  function refuse (account: Account, request: Waiting, localNow: number, why: string, units: number): void {
    request.parkedAt ??= localNow
    const waitMs = request.parkedAt + deps.refusalWaitMs - localNow
    if (!reserves || up(account) || waitMs <= 0) return request.reject(new StoreUnavailableError(refusalReason(account, localNow, why, units)))
    let waiting = parked.get(account.shard)
    if (waiting === undefined) parked.set(account.shard, waiting = new Set())
    const parkedWaiting = waiting
    const entry: Parked = {
      account,
      request,
      cancel: runtime.after(waitMs, () => {
        parkedWaiting.delete(entry)
        request.reject(new StoreUnavailableError(refusalReason(account, runtime.now(), `${why}, then ${Math.round(runtime.now() - request.parkedAt!)} ms waiting for it to answer again`, units)))
      })
    }
    parkedWaiting.add(entry)
  }

  /**
   * Shard `name` is up again: the requests waiting for it (refuse) ask Redis, ahead of those that came meanwhile. A
   * request resumed for the first time starts a new wait should its call be given up (its `parkedAt` cleared): that
   * call carries its decision, which a late reply still brings.
   */
  function shardUp (name: string): void {
    const waiting = parked.get(name)
    if (waiting === undefined) return
    parked.delete(name)
    const byAccount = new Map<Account, Waiting[]>()
    for (const { account, request, cancel } of waiting) {
      cancel()
      if (request.resumed !== true) { request.resumed = true; request.parkedAt = undefined }
      const requests = byAccount.get(account)
      if (requests === undefined) byAccount.set(account, [request])
      else requests.push(request)
    }
    for (const [account, requests] of byAccount) {
      account.requeue(requests)
      next(account)
    }
  }

  /** Why an outage answer refused (the error's message, logged by the limiter): what sent it there, the shard's state and since when, what was left. */
  function refusalReason (account: Account, localNow: number, why: string, units: number): string {
    const shard = shards.of(account.shard)
    const latest = clockOf(account).latest(localNow)
    return `limiter store unavailable: ${why}; shard ${shard.state} for ${Math.round(localNow - shard.changedAt)} ms; ` +
      `reserve ${account.reserve.left()} left of ${account.reserve.units}${latest !== undefined && !account.reserve.covers(latest) ? ' (lapsed)' : ''}, ` +
      `allowance ${reserves ? accounts.allowanceLeft(account, localNow, units, units * allowance.processes) : 0} left of ${units}; ${account.rate(localNow).toFixed(1)} requests/s`
  }

  /** What this process may still admit for `account` while its shard does not answer: its reserve left and its allowance left. */
  function outageRemaining (account: Account, localNow: number, units: number): number {
    return account.reserve.left() + accounts.allowanceLeft(account, localNow, units, units * allowance.processes)
  }

  /**
   * The reserve for `account`: a new one only when busy in its last second seen and the one before (a lone burst races
   * for the whole window); one held is kept while the id is seen, unless it races its limit. Asking for less than the
   * reserve lowers it in Redis, and while that call is in flight only the lower figure may be spent (reserveCap): a
   * want that followed the per-second rate's noise (a stalled loop, a quiet second) left a reserve Redis kept back
   * unspendable exactly when an outage began (docs/limiter-internals.md, "A reserve held through noise"). A new one
   * only in a call that asks for requests (`asking`): a call that only gives back (a block at its second's end) may run
   * while other processes' refusals wait for what it gives back, and a reserve taken there keeps it from them.
   */
  function reserveWant (account: Account, localNow: number, asking: boolean): number {
    if (!reserves || localNow - account.lastSeen > IDLE_MS) return 0
    const perSecond = account.rate(Math.min(localNow, account.second * 1000 + 999)) // a give-back at the second's end keeps it
    const room = accounts.roomSeen(account)
    if (room < perSecond * RESERVE_SLACK_SECONDS) return 0
    const kept = Math.min(account.reserve.units, Math.floor(room / 4))
    if (perSecond < HOT_RATE || account.seenBefore === 0 || !asking) return kept
    return Math.max(kept, Math.min(Math.ceil(perSecond * RESERVE_SECONDS), Math.floor(room / 4)))
  }

  function extraWant (account: Account, localNow: number, waiting: number): number {
    const perSecond = account.rate(localNow)
    if (perSecond < HOT_RATE) return 0
    const latest = clockOf(account).latest(localNow) ?? localNow
    const left = (Math.floor(latest / MINUTE_BUCKET_MS) + 1) * MINUTE_BUCKET_MS - latest
    return Math.max(0, Math.min(account.limits.perMinute, Math.ceil(perSecond * left / 1000)) - waiting)
  }

  /**
   * Whether a request first refused in minute bucket `refusedIn` still waits for blocks held elsewhere at a reply of
   * bucket `bucket`. Redis counts a block as held only until its bucket is BLOCK_HELD_BUCKETS seconds old (grant.lua
   * decide, where it reads the field p), so every block the request saw at its first refusal is given back or out of the count by bucket
   * refusedIn + BLOCK_HELD_BUCKETS. Until then it asks again when each second ends while Redis reports blocks held
   * elsewhere that could pay for it (newer ones too: units given back may be granted again as a block the next
   * second); from then on what Redis reports is newer than anything it saw, and its refusal is final. The bound: a
   * refusal is final at the first reply of bucket refusedIn + BLOCK_HELD_BUCKETS or later — at most that many seconds
   * and GIVE_BACK_MARGIN_MS after its first refusal by Redis's clock, plus the call that asks and its own loop's stalls.
   */
  function waitsForBlocks (refusedIn: number, bucket: number): boolean {
    return bucket < refusedIn + BLOCK_HELD_BUCKETS
  }

  // One entry's reply: its units join the pool, its requests are admitted from it or rejected. Units too late for
  // their bucket are given back; their requests ask again after it (the delay returned).
  function answer (account: Account, reply: GrantReply, group: Waiting[], redisNow: number, received: number, answered: boolean): number {
    if (reply.bannedAt > 0) deps.onBan(account.id, reply.bannedUntil)
    if (reply.outcome === 'key_banned') {
      if (!answered) for (const request of group) request.resolve(consumeResult(account, 'key_banned', redisNow, 'store', reply.bannedUntil))
      return 0
    }
    const cost = group[0]?.cost ?? 1
    account.fillPool(reply.admitted * cost + reply.extra, reply.extra, redisNow)
    if (reply.extra > 0) giveBackAtBucketEnd(account)
    const bucket = Math.floor(redisNow / MINUTE_BUCKET_MS)
    if (answered) {
      // The call was given up: its requests went to the outage policy, and those it could not admit wait (refuse).
      // Those Redis admitted here ask again, when their shard is up, as requests waiting since this bucket: the units
      // go back unless the pool still pays for them, and a ban begun meanwhile — by the refusals these units caused
      // elsewhere — does not answer them (grant.lua `waited`), as for a reply read too late to spend (below). Else the
      // flood after a freeze lost what such a reply counted: ban-recover seed 1356, 26 of 79 (docs/simulator.md).
      for (const request of group.slice(0, reply.admitted)) request.refusedIn ??= bucket
      return 0
    }
    const clock = clockOf(account)
    const retry: Waiting[] = []
    // Blocks other processes hold (granted in the last BLOCK_HELD_BUCKETS seconds, not given back yet) may come back:
    // that many refusals ask again when this second ends — while the blocks they saw can still be held (limiter-internals.md).
    // They are provisional: not counted toward a ban, and a ban this reply starts does not answer them (grant.lua).
    let pooledElsewhere = reply.pooled
    let margin = 1 // after the bucket ends; a refusal waiting for blocks also gives their holders time to give back
    group.forEach((request, index) => {
      if (index < reply.admitted) {
        if (account.spendPool(request.cost, clock, received)) {
          request.resolve(consumeResult(account, 'ok', redisNow, 'store'))
        } else if (++request.attempts < MAX_ATTEMPTS) {
          request.refusedIn ??= bucket // asks again since this bucket: a ban begun meanwhile does not answer it
          retry.push(request)
        } else {
          outage(account, request, received, `each of ${MAX_ATTEMPTS} replies too late to spend`)
        }
        return
      }
      request.refusedIn ??= bucket
      if (pooledElsewhere >= request.cost && waitsForBlocks(request.refusedIn, bucket)) {
        pooledElsewhere -= request.cost
        margin = GIVE_BACK_MARGIN_MS
        retry.push(request)
        return
      }
      // The 429 that crossed the threshold starts the ban; those after it find the ban in force, as does the final
      // refusal of a request that waited for blocks while a ban began (decided by its windows: bannedUntil, no bannedAt).
      const nth = index - reply.admitted + 1
      const outcome = reply.bannedAt === 0 ? (reply.bannedUntil > 0 ? 'key_banned' : 'rate_limited')
        : nth < reply.bannedAt ? 'rate_limited' : nth === reply.bannedAt ? 'ban_started' : 'key_banned'
      request.resolve(consumeResult(account, outcome, redisNow, 'store', outcome === 'rate_limited' ? 0 : reply.bannedUntil))
    })
    account.requeue(retry)
    if (retry.length === 0) return 0
    const earliest = clock.earliest(received) ?? received
    return Math.min(MINUTE_BUCKET_MS + margin, Math.max(1, (account.pool.bucket + 1) * MINUTE_BUCKET_MS - earliest + margin))
  }

  /** When `account`'s pool can no longer be spent, what is left of it goes back at once (others may wait for it). */
  function giveBackAtBucketEnd (account: Account): void {
    if (!account.pool.armLapseTimer()) return
    runtime.after(account.pool.msUntilLapse(clockOf(account).latest(runtime.now()) ?? runtime.now()), () => {
      account.pool.lapseTimerFired()
      account.pool.expire(clockOf(account), runtime.now())
      if (account.pool.units > 0) giveBackAtBucketEnd(account) // the clock's bounds say not yet, or a new block came
      next(account)
    })
  }

  /** The job of one write call for `account`, built at its turn's end with everything then waiting. */
  function writeJob (account: Account): Job {
    let groups: Waiting[][] = []
    let sent: GrantEntry['adjustments'] = []
    let sentAllowance: GrantEntry['adjustments'] = []
    let timedOut = false
    return {
      key: account.key,
      build () {
        const localNow = runtime.now()
        account.pool.expire(clockOf(account), localNow)
        drain(account, localNow)
        groups = []
        // One entry per cost, and per first refusal for requests waiting for blocks (grant.lua decides them by it).
        for (const request of account.takeWaiting()) {
          const group = groups.find((group) => group[0]!.cost === request.cost && group[0]!.refusedIn === request.refusedIn)
          if (group === undefined) groups.push([request])
          else group.push(request)
        }
        const want = reserveWant(account, localNow, groups.length > 0)
        sent = account.reserve.writeBacks()
        sentAllowance = account.allowance.writeBacks()
        const givenBack = account.pool.takeGiveBacks()
        const adjustments = [...givenBack, ...sent, ...sentAllowance]
        if (groups.length === 0 && adjustments.length === 0 && want >= account.reserve.units) return []
        // Applied or not, reserve admissions stay within min(reserve, what this call writes back + want).
        account.reserve.capInFlight(want)
        const waiting = groups.reduce((sum, group) => sum + group.length, 0)
        if (groups.length === 0) return [entryOf(account, 0, 1, 0, want, adjustments)]
        // The adjustments go with the first entry (applied before any request is decided), the block and a reserve's
        // growth with the last (granted once every request of the call is decided: granted first, either took room a
        // later entry's requests were refused for — the block while they waited for blocks held elsewhere, the reserve
        // kept back from them for good). An earlier entry keeps at most the reserve held: min(want, held) keeps
        // every entry's floor at min(held less the write-backs, want), the cap above.
        const extra = waiting > 0 ? extraWant(account, localNow, waiting) : 0
        const last = groups.length - 1
        const held = Math.min(want, account.reserve.units)
        return groups.map((group, index) => entryOf(account, group.length, group[0]!.cost, index === last ? extra : 0, index === last ? want : held, index === 0 ? adjustments : [], true, group[0]!.refusedIn))
      },
      replied (replies, info) {
        account.callEnded()
        if (info !== undefined && replies.length > 0) {
          const clock = clockOf(account)
          clock.learn(info.redisNow, info.sent, info.received)
          const last = replies[replies.length - 1]!
          account.heard(last, info.redisNow, info.received)
          account.reserve.kept(last.reserve, info.redisNow)
          account.reserve.settle(sent)
          account.allowance.settle(sentAllowance)
          let delay = 0
          replies.forEach((reply, index) => { delay = Math.max(delay, answer(account, reply, groups[index] ?? [], info.redisNow, info.received, timedOut)) })
          account.pool.expire(clock, runtime.now())
          next(account, delay)
          return
        }
        next(account)
      },
      timedOut () {
        // The shard is down now: what this call carried and what waited for its reply are answered
        // by the outage policy (its reply, if it comes, still fills the pool).
        timedOut = true
        const localNow = runtime.now()
        for (const request of [...groups.flat(), ...account.takeWaiting()]) outage(account, request, localNow, 'its call timed out')
      },
      failed (err) {
        // Whether Redis ran it is unknown: the reserve is held to the cap that holds either way, the
        // reserve admissions it carried are sent again (counted twice at worst), its give-backs are not.
        account.callEnded()
        account.reserve.callFailed()
        if (!timedOut) {
          const localNow = runtime.now()
          for (const request of groups.flat()) outage(account, request, localNow, `its call failed (${err.message})`)
        }
        next(account)
      }
    }
  }

  return { clockOf, up, call, callForWaiting, drain, next, outage, shardUp }
}
