// A store call with a time budget that cannot fire for a reply already received, nor for a reply
// queued behind others on a Redis that is answering: a false timeout would hand the decision to
// the fallback, i.e. over-admit. docs/limiter-internals.md gives the whole argument; the short of it
// is beside each step below.

import { atTurnEnd } from './turn-end.js'

/** How recently a shard (one Redis connection's worth of calls) last answered anything. */
export interface Progress {
  /** Clock ms of the shard's last reply; 0: none yet. */
  lastReplyAt: number
}

export interface Budget {
  /** Fails a call after this long without a reply from its shard. */
  readonly budgetMs: number
  /** Fails a call this long after it was written, whatever its shard is doing. */
  readonly capMs: number
  /** The shard's progress, updated by every reply; undefined: the budget alone decides. */
  readonly progress?: Progress | undefined
  /** Clock of the budget (ms, default Date.now). */
  readonly now?: (() => number) | undefined
}

export class StoreTimeoutError extends Error {
  constructor (ms: number) {
    super(`limiter store did not answer within ${ms} ms`)
    this.name = 'StoreTimeoutError'
  }
}

export function asError (err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err))
}

/** Calls started in one event-loop turn (turn-end.ts) on one shard: they leave in one write (the Redis store's batch), so one timer bounds them all. */
interface Turn {
  readonly budgetMs: number
  readonly capMs: number
  readonly progress: Progress | undefined
  readonly now: () => number
  started: number
  timer: NodeJS.Timeout | undefined
  /** Calls not settled yet: when the last one settles, the timer goes. */
  readonly waiting: Set<Waiter>
}

interface Waiter {
  done: boolean
  readonly timedOut: () => void
}

/** This turn's Turn per shard, until the turn's writes have left (its end). */
const current = new Map<Progress, Turn>()

function turnFor ({ budgetMs, capMs, progress, now = Date.now }: Budget): Turn {
  const found = progress === undefined ? undefined : current.get(progress)
  if (found !== undefined && found.budgetMs === budgetMs && found.capMs === capMs && found.now === now) return found
  const turn: Turn = { budgetMs, capMs, progress, now, started: now(), timer: undefined, waiting: new Set() }
  if (progress !== undefined && found === undefined) current.set(progress, turn)
  // The budget starts at the write: the Redis store writes this turn's calls at the turn's end
  // (stores/redis.ts), queued there by the first call() of the turn, before this.
  atTurnEnd(() => {
    if (progress !== undefined && current.get(progress) === turn) current.delete(progress)
    if (turn.waiting.size === 0) return
    turn.started = now()
    turn.timer = setTimeout(arm, budgetMs, turn)
  })
  return turn
}

// Timers run before the poll phase reads sockets: the timer only arms the verdict, which
// setImmediate runs in the check phase, after every reply already received has been read.
function arm (turn: Turn): void { setImmediate(verdict, turn) }

function verdict (turn: Turn): void {
  turn.timer = undefined
  if (turn.waiting.size === 0) return
  // Budget without progress: while the shard keeps answering (our calls are queued behind others),
  // wait until it has been quiet for the whole budget, up to the cap.
  const t = turn.now()
  const quietFor = t - (turn.progress?.lastReplyAt ?? 0)
  const postpone = Math.min(turn.budgetMs - quietFor, turn.started + turn.capMs - t)
  if (postpone > 0) {
    turn.timer = setTimeout(arm, postpone, turn)
    return
  }
  for (const waiter of [...turn.waiting]) waiter.timedOut()
}

function settle (turn: Turn, waiter: Waiter): void {
  waiter.done = true
  turn.waiting.delete(waiter)
  if (turn.waiting.size === 0 && turn.timer !== undefined) {
    clearTimeout(turn.timer)
    turn.timer = undefined
  }
}

/**
 * `call()`, rejected with StoreTimeoutError once its budget is spent; a call that throws rejects.
 * Calls of one turn with one `progress` (one shard) share their timer.
 */
export function boundedCall<T> (call: () => Promise<T>, budget: Budget): Promise<T> {
  const { budgetMs, progress, now = Date.now } = budget
  return new Promise<T>((resolve, reject) => {
    let pending: Promise<T>
    try {
      pending = call()
    } catch (err) {
      pending = Promise.reject(asError(err))
    }
    const turn = turnFor(budget)
    const waiter: Waiter = {
      done: false,
      timedOut () {
        settle(turn, waiter)
        reject(new StoreTimeoutError(budgetMs))
      }
    }
    turn.waiting.add(waiter)
    pending.then((value) => {
      if (progress !== undefined) progress.lastReplyAt = now()
      if (waiter.done) return
      settle(turn, waiter)
      resolve(value)
    }, (err: unknown) => {
      if (waiter.done) return
      settle(turn, waiter)
      reject(asError(err))
    })
  })
}
