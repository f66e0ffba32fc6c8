// Admission to the backend's connections, so that the upstream budget (UPSTREAM_TIMEOUT_MS) is end
// to end: a request waits here, not in undici's unbounded queue, and its wait counts against its
// budget. Waiters are served consumer by consumer in turn, each consumer's in order (fair-queue.ts):
// one consumer's flood does not queue everyone else's requests behind its own. A request that cannot be served within its budget is told so at once — 503 with
// Retry-After — instead of joining a queue it would time out in: when the queue is full, when the
// wait the queue predicts (see #expectedWaitMs) plus the backend's recent time per request would
// exceed the budget, or when its budget runs out before a connection frees up.
// A request that got a connection keeps what is left of its budget as undici's headers timeout,
// so a slow answer is still 504 upstream_timeout (docs/decisions.md §7). A waiter whose client goes
// away leaves the queue at once (leave()): a reset client does not keep a place of UPSTREAM_QUEUE_MAX.
import { performance } from 'node:perf_hooks'
import { FairQueue } from './fair-queue.js'

/** Requests in flight to the backend at most: the pool's connections (no HTTP pipelining). */
export const DEFAULT_UPSTREAM_CONNECTIONS = 64
/** Requests waiting for a connection at most; beyond, 503 at once (bounded memory, even when the backend's pace is unknown). */
export const DEFAULT_UPSTREAM_QUEUE_MAX = 1024
/** Weight of the newest sample in the moving average of the backend's time per request. */
export const SERVICE_TIME_WEIGHT = 0.1
/** A waiter is admitted only if its predicted wait leaves it this much more than the backend's usual time. */
export const SERVICE_TIME_MARGIN = 0.1

/** setTimeout's largest delay; a longer one fires at once. */
const MAX_TIMER_MS = 2 ** 31 - 1

export type UpstreamShedReason = 'queue_full' | 'budget'
export const UPSTREAM_SHED_REASONS: readonly UpstreamShedReason[] = ['queue_full', 'budget']

/** One request that wants a backend connection. */
export interface UpstreamWaiter {
  /** Whose request it is (its consumer, or client address without a key): lanes are served in turn. */
  readonly lane?: string
  /** Set by the gate: when the request asked for a connection (the gate's clock, ms). */
  enteredAt: number
  /**
   * It has a connection; `remainingMs` of its budget are left for the backend's answer. It gives the
   * connection back with release(). If it throws, the gate takes the connection back itself and
   * calls `failed`: a waiter's bug cannot keep a connection (issue 39, row 1).
   */
  dispatch: (remainingMs: number) => void
  /** dispatch threw `err`: answer the request (its connection is already given back). */
  failed: (err: unknown) => void
  /** It will not get one in time: answer 503, retry after this many seconds. */
  shed: (reason: UpstreamShedReason, retryAfterSeconds: number) => void
  /** The client went away while it waited: drop it without calling the backend. */
  abandoned: () => boolean
}

export interface UpstreamGateOptions {
  /** Requests in flight at most: the pool's connections (no HTTP pipelining). */
  connections: number
  queueMax?: number
  /** The upstream budget of one request, from asking for a connection to the answer's headers. */
  budgetMs: number
  /** Monotonic ms; tests inject one. */
  now?: () => number
}

export interface UpstreamGateStatus {
  readonly inFlight: number
  readonly queued: number
  /** Requests answered 503 by the gate since start, by reason. */
  readonly shed: Readonly<Record<UpstreamShedReason, number>>
  /**
   * The standing queue's delay since the last call (ms): the shortest age of the oldest waiter at
   * the moments one got a connection meanwhile (0 when one got it at once), or, when none did, how
   * long the oldest waiter has waited. A burst that drains leaves it at 0; only a queue that never empties raises it
   * (CoDel's measure). One reader: load shedding's window.
   */
  takeStandingDelayMs: () => number
  /**
   * How long every connection has been held, with requests waiting or turned away meanwhile, without
   * one given back (ms, on the gate's clock); 0 while a connection is free or nobody waits. Liveness
   * reads it (runtime/liveness.ts): only a leaked or stuck gate keeps it growing.
   */
  stalledMs: (now: number) => number
}

export class UpstreamGate implements UpstreamGateStatus {
  readonly #connections: number
  readonly #queueMax: number
  readonly #budgetMs: number
  readonly #now: () => number
  #inFlight = 0
  readonly #queue = new FairQueue<UpstreamWaiter>()
  /** Moving average of a connection's time per request (dispatch → released); NaN before the first. */
  #serviceMs = NaN
  #timer: NodeJS.Timeout | undefined
  #shortestWaitMs = Infinity
  readonly #shed: Record<UpstreamShedReason, number> = { queue_full: 0, budget: 0 }
  /** When a connection was last given back, or the last one taken: the gate's last progress. */
  #progressAt: number
  /** A request waited or was turned away since then. */
  #turnedAway = false

  constructor (opts: UpstreamGateOptions) {
    this.#connections = opts.connections
    this.#queueMax = opts.queueMax ?? DEFAULT_UPSTREAM_QUEUE_MAX
    this.#budgetMs = opts.budgetMs
    this.#now = opts.now ?? (() => performance.now())
    this.#progressAt = this.#now()
  }

  stalledMs (now: number): number {
    if (this.#inFlight < this.#connections || (!this.#turnedAway && this.queued === 0)) return 0
    return Math.max(0, now - this.#progressAt)
  }

  get inFlight (): number { return this.#inFlight }
  get queued (): number { return this.#queue.size }
  get shed (): Readonly<Record<UpstreamShedReason, number>> { return this.#shed }
  get serviceMs (): number { return this.#serviceMs }

  /** Dispatches `waiter` now, queues it, or sheds it. */
  enter (waiter: UpstreamWaiter): void {
    const now = this.#now()
    waiter.enteredAt = now
    const queued = this.queued
    if (queued === 0 && this.#inFlight < this.#connections) {
      this.#shortestWaitMs = 0
      this.#dispatch(waiter, this.#budgetMs)
      return
    }
    this.#turnedAway = true
    const position = this.#queue.position(waiter.lane)
    if (queued >= this.#queueMax) {
      this.#refuse(waiter, 'queue_full', this.#expectedWaitMs(position))
      return
    }
    const wait = this.#expectedWaitMs(position)
    // Unknown pace (no answer yet): only the queue bound and the deadline below apply.
    if (wait + this.#serviceMs * (1 + SERVICE_TIME_MARGIN) > this.#budgetMs) {
      this.#refuse(waiter, 'budget', wait)
      return
    }
    this.#queue.push(waiter)
    if (this.#timer === undefined) this.#arm(now)
  }

  /**
   * `waiter`'s client went away before its turn: it leaves the queue now, and its place counts
   * toward UPSTREAM_QUEUE_MAX no longer. Nothing for a waiter that is not queued (dispatched or shed).
   */
  leave (waiter: UpstreamWaiter): void {
    if (!this.#queue.remove(waiter) || this.queued > 0) return
    clearTimeout(this.#timer)
    this.#timer = undefined
  }

  /** A connection is free again: `dispatchedAt` is when its request was dispatched (the gate's clock). */
  release (dispatchedAt: number): void {
    const took = this.#now() - dispatchedAt
    this.#serviceMs = Number.isNaN(this.#serviceMs) ? took : this.#serviceMs + SERVICE_TIME_WEIGHT * (took - this.#serviceMs)
    this.#inFlight--
    this.#progressAt = this.#now()
    this.#turnedAway = false
    this.#drain()
  }

  takeStandingDelayMs (): number {
    const shortest = this.#shortestWaitMs
    this.#shortestWaitMs = Infinity
    if (shortest !== Infinity) return shortest
    const oldest = this.#queue.oldest()
    return oldest === undefined ? 0 : this.#now() - oldest.enteredAt
  }

  /** Sheds every waiter (the gateway is closing) and stops the timer. */
  close (): void {
    clearTimeout(this.#timer)
    this.#timer = undefined
    let waiter: UpstreamWaiter | undefined
    while ((waiter = this.#queue.takeOldest()) !== undefined) this.#refuse(waiter, 'budget', 0)
  }

  /**
   * Predicted wait of the `position`-th waiter, on the safe side: as if the connections freed up all
   * together, every serviceMs (requests that arrived in one burst do). Spread out, they free up
   * sooner; a prediction too short would only shed the waiter later, after it waited.
   */
  #expectedWaitMs (position: number): number {
    return Math.ceil(position / this.#connections) * this.#serviceMs
  }

  /** Gives `waiter` a connection; one that throws gives it back at once (without a service-time sample). */
  #dispatch (waiter: UpstreamWaiter, remainingMs: number): void {
    // The last free connection taken: a stall is counted from here at the earliest.
    if (++this.#inFlight === this.#connections) this.#progressAt = this.#now()
    try {
      waiter.dispatch(remainingMs)
    } catch (err) {
      this.#inFlight--
      waiter.failed(err)
    }
  }

  #refuse (waiter: UpstreamWaiter, reason: UpstreamShedReason, waitMs: number): void {
    this.#shed[reason]++
    const seconds = Number.isFinite(waitMs) ? Math.ceil(waitMs / 1000) : 1
    waiter.shed(reason, Math.min(Math.max(1, seconds), Math.max(1, Math.ceil(this.#budgetMs / 1000))))
  }

  #drain (): void {
    const now = this.#now()
    while (this.#inFlight < this.#connections) {
      // The queue's standing delay is the oldest waiter's age, whoever's turn it is: served in turn,
      // a light consumer's short wait says nothing about the queue a heavy one keeps.
      const oldest = this.#queue.oldest()
      const waiter = this.#queue.takeNext()
      if (waiter === undefined || oldest === undefined) break
      if (waiter.abandoned()) continue
      const remaining = waiter.enteredAt + this.#budgetMs - now
      // Less budget left than the backend takes: it would only occupy a connection and time out.
      if (remaining <= 0 || remaining < this.#serviceMs) {
        this.#refuse(waiter, 'budget', this.#expectedWaitMs(this.queued + 1))
        continue
      }
      const standing = now - oldest.enteredAt
      if (standing < this.#shortestWaitMs) this.#shortestWaitMs = standing
      this.#dispatch(waiter, remaining)
    }
    if (this.queued === 0) {
      clearTimeout(this.#timer)
      this.#timer = undefined
    }
  }

  /** One timer, for the oldest waiter's deadline (one budget for all: no later waiter expires first). */
  #arm (now: number): void {
    const oldest = this.#queue.oldest()
    if (oldest === undefined) return
    this.#timer = setTimeout(() => { this.#expire() }, Math.min(MAX_TIMER_MS, Math.max(0, oldest.enteredAt + this.#budgetMs - now)))
    this.#timer.unref()
  }

  #expire (): void {
    this.#timer = undefined
    const now = this.#now()
    for (;;) {
      const oldest = this.#queue.oldest()
      if (oldest === undefined || oldest.enteredAt + this.#budgetMs > now) break
      this.#queue.takeOldest()
      if (!oldest.abandoned()) this.#refuse(oldest, 'budget', this.#expectedWaitMs(this.queued + 1))
    }
    if (this.queued > 0) this.#arm(now)
  }
}
