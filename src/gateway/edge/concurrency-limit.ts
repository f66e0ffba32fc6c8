// Load shedding's actuator: a limit on requests in flight through the gateway, adapted once per
// window from the gateway's queueing delay (edge/load-shedding.ts measures it), and the fair-share
// rule at the limit. It tells a burst from overload as CoDel does (docs/decisions.md §7): only a
// standing queue is shed — the delay over target for a whole interval, window after window, with
// more requests in the gateway than the backend takes at once and the queue fed, not draining. A
// burst is a queue that drains: once its requests are in, each window answers more than arrives,
// however long it takes, and nothing of it is shed. A loop slowed by a neighbour rather than by
// requests sheds nothing either. Once shedding, the limit is adapted every window (AIMD); an
// interval under target without reaching the limit ends it, and the next shedding starts from
// twice the limit it ended at (or less): a gateway overloaded again converges in a window or two.
import { DEFAULT_UPSTREAM_CONNECTIONS } from '../proxy/upstream-gate.js'

/** How often the limit is adapted (ms). */
export const DEFAULT_SHED_WINDOW_MS = 100
/**
 * How long a standing queue must last before anything is shed (ms, SHED_INTERVAL_MS): over target,
 * fed and not draining, window after window. Longer than a burst takes to arrive (its requests then
 * drain, which no longer counts), short enough that a gateway meeting real overload sheds within
 * half a second.
 */
export const DEFAULT_SHED_INTERVAL_MS = 500
/** A window answering more than this many times what arrived in it is draining: its queue is going away by itself. */
export const DRAINING_RATIO = 2
/**
 * The limit never goes below the backend's connections (UPSTREAM_CONNECTIONS, default 64): as many
 * requests as the backend can take always get through, and only more than that in flight is a
 * queue in the gateway.
 */
export const DEFAULT_MIN_CONCURRENCY_LIMIT = DEFAULT_UPSTREAM_CONNECTIONS
/** The limit when not shedding: in practice, no limit. */
export const MAX_CONCURRENCY_LIMIT = 100_000
const DECREASE = 0.75
const INCREASE = 1.1
const SLOW_START = 2

export interface ConcurrencyLimitOptions {
  /** Target queueing delay (ms). */
  targetMs: number
  minLimit?: number
  windowMs?: number
  intervalMs?: number
}

/** The limit and the fair-share rule, driven by a queueing-delay reading per window. */
export class ConcurrencyLimit {
  limit = MAX_CONCURRENCY_LIMIT
  inFlight = 0
  shed = 0
  readonly #targetMs: number
  readonly #minLimit: number
  /** Windows in a row that an interval takes (at least one). */
  readonly #intervalWindows: number
  #peak = 0
  /** Requests that reached the limit in this window (admitted or shed), and those answered. */
  #arrivals = 0
  #departures = 0
  /** Windows in a row with a standing queue: delay over target, a queue in the gateway, not draining. */
  #overWindows = 0
  /** Windows in a row, while shedding, with the delay under target and the limit not reached. */
  #calmWindows = 0
  /** The limit in force when the last shedding ended: where the next one starts at the latest. */
  #lastLimit = MAX_CONCURRENCY_LIMIT
  readonly #byClient = new Map<string, number>()

  constructor (opts: ConcurrencyLimitOptions) {
    this.#targetMs = opts.targetMs
    this.#minLimit = opts.minLimit ?? DEFAULT_MIN_CONCURRENCY_LIMIT
    this.#intervalWindows = Math.max(1, Math.ceil((opts.intervalMs ?? DEFAULT_SHED_INTERVAL_MS) / (opts.windowMs ?? DEFAULT_SHED_WINDOW_MS)))
  }

  /** Whether requests are being shed (the limit is in force). */
  get shedding (): boolean {
    return this.limit < MAX_CONCURRENCY_LIMIT
  }

  /** Admits (and counts) a request of `client`, or returns false: shed it. */
  admit (client: string): boolean {
    this.#arrivals++
    const held = this.#byClient.get(client) ?? 0
    if (this.inFlight >= this.limit) {
      // At the limit, a client still holding less than an equal share of it is let through.
      const clients = this.#byClient.size + (held === 0 ? 1 : 0)
      if (held >= Math.floor(this.limit / clients)) {
        this.shed++
        return false
      }
    }
    this.#byClient.set(client, held + 1)
    if (++this.inFlight > this.#peak) this.#peak = this.inFlight
    return true
  }

  done (client: string): void {
    this.#departures++
    this.inFlight--
    const held = (this.#byClient.get(client) ?? 1) - 1
    if (held <= 0) this.#byClient.delete(client)
    else this.#byClient.set(client, held)
  }

  /** End of a window whose queueing delay was `delayMs`. */
  adapt (delayMs: number): void {
    const over = delayMs > this.#targetMs
    // More in flight than the backend takes at once: requests are queueing in the gateway.
    const queue = this.#peak > this.#minLimit
    const draining = this.#departures > DRAINING_RATIO * this.#arrivals
    this.#arrivals = 0
    this.#departures = 0
    if (over && queue && !draining) {
      this.#calmWindows = 0
      // A standing queue for a whole interval (or again, while already shedding): cut. Shedding that
      // starts again starts from twice where the last one ended, not from everything in flight.
      if (this.shedding) {
        this.limit = Math.max(this.#minLimit, Math.floor(Math.min(this.limit, this.#peak) * DECREASE))
      } else if (++this.#overWindows >= this.#intervalWindows) {
        this.limit = Math.max(this.#minLimit, Math.floor(Math.min(2 * this.#lastLimit, this.#peak) * DECREASE))
      }
    } else {
      // A burst draining, or a delay that is not the gateway's requests' (a neighbour): start again.
      this.#overWindows = 0
      if (!this.shedding || over) {
        this.#calmWindows = 0
      } else if (this.#peak >= this.limit) {
        this.#calmWindows = 0
        this.limit = Math.min(MAX_CONCURRENCY_LIMIT, Math.ceil(this.limit * (delayMs <= this.#targetMs / 2 ? SLOW_START : INCREASE)))
      } else if (++this.#calmWindows >= this.#intervalWindows) {
        // An interval under target without reaching the limit: the overload is over.
        this.#lastLimit = this.limit
        this.limit = MAX_CONCURRENCY_LIMIT
        this.#calmWindows = 0
      }
    }
    this.#peak = this.inFlight
  }
}
