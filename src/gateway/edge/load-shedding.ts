// Load shedding at the edge: when the gateway holds more requests than it can serve promptly, the
// excess is answered 503 at once instead of queueing — behind it, every request (a well-behaved
// client's too) would wait for the whole queue (issue 26, finding 3). Docs: docs/decisions.md §7.
//
// - Signal: the gateway's own queueing delay, over short windows, from the two places a request
//   waits in it: its socket's buffer, for about one turn of the event loop (the loop's median delay),
//   and the upstream gate, for a backend connection (the standing queue's delay, CoDel's measure: a
//   burst that drains does not count). Whichever is longer.
// - Actuator: a limit on requests in flight through the gateway, adapted each window (AIMD): cut
//   when the delay is over its target, raised when the limit was reached and the delay is under it —
//   doubled while far under, so a gateway recovers from a pause in a few windows. Never below the
//   backend's connections.
// - Fairness: at the limit, a consumer (for anonymous requests: its client address, as the limiter
//   counts it) below an equal share of the limit is still admitted; the consumers holding more are
//   shed. One client's flood does not take everyone's capacity.
// - Runs after authentication (a cached map lookup for known keys), before the limiter: a shed
//   request costs no quota, no Redis call, nothing after. Its rate-limit headers state the consumer's
//   policy with nothing left until Retry-After, like the limiter-unavailable 503.
// - A shed connection is not read again before its Retry-After: a client that ignores it and sends
//   again at once would otherwise turn every 503 into another request to parse and shed, and the
//   sheds alone would fill the loop.
import { monitorEventLoopDelay, performance, type IntervalHistogram } from 'node:perf_hooks'
import fp from 'fastify-plugin'
import type { FastifyRequest } from 'fastify'
import { gatewayErrors } from '../../interface/errors.js'
import { unavailableHeaders } from '../limiter/decide.js'
import { limiterId } from '../limiter/consumer-id.js'
import { DEFAULT_UPSTREAM_CONNECTIONS } from '../proxy/upstream-gate.js'
import { holdConnection, whenResponseOver } from './pipeline-gate.js'

/** The queueing delay (ms) the gateway keeps under overload (loop delay, standing wait for a backend connection); 0 turns load shedding off. */
export const DEFAULT_SHED_QUEUE_DELAY_MS = 10
/** How often the limit is adapted (ms). */
export const DEFAULT_SHED_WINDOW_MS = 100
/** Retry-After of a shed request, and how long its connection is left unread. */
export const DEFAULT_SHED_RETRY_AFTER_SECONDS = 1
/**
 * The limit never goes below the backend's connections (UPSTREAM_CONNECTIONS, default 64): as many
 * requests as the backend can take always get through, and a loop slowed by something else than
 * requests (a neighbour taking the CPU) does not shed a lightly loaded gateway.
 */
export const DEFAULT_MIN_CONCURRENCY_LIMIT = DEFAULT_UPSTREAM_CONNECTIONS
/** The limit before any overload, and at most: in practice, no limit. */
export const MAX_CONCURRENCY_LIMIT = 100_000
/** Sampling interval of the loop-delay monitor (ms): its timer fires once per turn at most. */
const LOOP_DELAY_RESOLUTION_MS = 5
/** Holds last from (1 − this) × Retry-After to Retry-After. */
const HOLD_SPREAD = 0.5
const DECREASE = 0.75
const INCREASE = 1.1
const SLOW_START = 2

export interface LoadSheddingOptions {
  /** Target queueing delay (ms); 0: no shedding. */
  queueDelayMs?: number
  windowMs?: number
  /** The limit's floor: the backend's connections. */
  minLimit?: number
  /** The loop delay of the window that just ended (ms); tests inject one. Default: perf_hooks' monitor. */
  loopDelay?: () => number
}

export interface LoadSheddingStatus {
  /** Requests in flight through the gateway now (admitted, not yet answered). */
  readonly inFlight: number
  /** The concurrency limit in force. */
  readonly limit: number
  /** Requests shed since start. */
  readonly shed: number
  /** The last window's delays (ms): the event loop's median, the standing wait for a backend connection. */
  readonly delays: { readonly loop: number, readonly upstream: number }
}

declare module 'fastify' {
  interface FastifyInstance {
    loadShedding: LoadSheddingStatus
  }
}

/** The limit and the fair-share rule, driven by a loop-delay reading per window. */
export class ConcurrencyLimit implements LoadSheddingStatus {
  limit = MAX_CONCURRENCY_LIMIT
  inFlight = 0
  shed = 0
  delays = { loop: 0, upstream: 0 }
  #peak = 0
  readonly #byClient = new Map<string, number>()

  constructor (private readonly targetMs: number, private readonly minLimit = DEFAULT_MIN_CONCURRENCY_LIMIT) {}

  /** Admits (and counts) a request of `client`, or returns false: shed it. */
  admit (client: string): boolean {
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
    this.inFlight--
    const held = (this.#byClient.get(client) ?? 1) - 1
    if (held <= 0) this.#byClient.delete(client)
    else this.#byClient.set(client, held)
  }

  /** End of a window whose queueing delay was `delayMs`. */
  adapt (delayMs: number): void {
    if (delayMs > this.targetMs) {
      this.limit = Math.max(this.minLimit, Math.floor(Math.min(this.limit, this.#peak) * DECREASE))
    } else if (this.#peak >= this.limit) {
      this.limit = Math.min(MAX_CONCURRENCY_LIMIT, Math.ceil(this.limit * (delayMs <= this.targetMs / 2 ? SLOW_START : INCREASE)))
    }
    this.#peak = this.inFlight
  }
}

/**
 * Median loop delay of each window from perf_hooks' monitor (its histogram holds the time between
 * two turns of its timer). No sample at all: the whole window was one turn.
 */
function monitoredLoopDelay (): { read: () => number, stop: () => void } {
  const histogram: IntervalHistogram = monitorEventLoopDelay({ resolution: LOOP_DELAY_RESOLUTION_MS })
  histogram.enable()
  let lastRead = performance.now()
  return {
    read () {
      const now = performance.now()
      const turn = histogram.count === 0 ? now - lastRead : histogram.percentile(50) / 1e6
      histogram.reset()
      lastRead = now
      return Math.max(0, turn - LOOP_DELAY_RESOLUTION_MS)
    },
    stop () { histogram.disable() }
  }
}

/**
 * How long a shed connection is held: between half and all of `ms` (the client was told to wait
 * `ms`), at random: connections shed in one turn would otherwise all be read again in one turn a
 * second later, a wave that slows the loop and cuts the limit again.
 */
function holdMs (ms: number): number {
  return ms * (1 - HOLD_SPREAD * Math.random())
}

function clientOf (request: FastifyRequest): string {
  return limiterId(request.consumer, request.ip, request.snapshot.anonymous.ipv6Prefix)
}

export const loadSheddingPlugin = fp<LoadSheddingOptions>(async function loadSheddingPlugin (app, opts) {
  const target = opts.queueDelayMs ?? DEFAULT_SHED_QUEUE_DELAY_MS
  if (target <= 0) {
    app.decorate('loadShedding', { inFlight: 0, limit: 0, shed: 0, delays: { loop: 0, upstream: 0 } })
    return
  }
  const limiter = new ConcurrencyLimit(target, opts.minLimit)
  app.decorate('loadShedding', limiter)

  const monitor = opts.loopDelay === undefined ? monitoredLoopDelay() : undefined
  const loopDelay = opts.loopDelay ?? monitor?.read ?? (() => 0)
  // The proxy registers after this plugin: its gate is looked up when a window ends.
  const standingDelay = (): number => app.hasDecorator('upstream') ? app.upstream.takeStandingDelayMs() : 0
  const timer = setInterval(() => {
    limiter.delays = { loop: loopDelay(), upstream: standingDelay() }
    limiter.adapt(Math.max(limiter.delays.loop, limiter.delays.upstream))
  }, opts.windowMs ?? DEFAULT_SHED_WINDOW_MS)
  timer.unref()
  app.addHook('onClose', async () => {
    clearInterval(timer)
    monitor?.stop()
  })

  const retryAfterMs = DEFAULT_SHED_RETRY_AFTER_SECONDS * 1000
  app.addHook('onRequest', function shedOverload (request, reply, done) {
    const client = clientOf(request)
    if (limiter.admit(client)) {
      whenResponseOver(reply.raw, () => { limiter.done(client) })
      done()
      return
    }
    // Held from now: the connection's next request must not start as soon as this answer is written.
    holdConnection(request.raw.socket, holdMs(retryAfterMs))
    const limits = request.consumer?.limits ?? request.snapshot.anonymous
    done(gatewayErrors.overloaded(DEFAULT_SHED_RETRY_AFTER_SECONDS, unavailableHeaders(limits, app.clock())))
  })
}, { name: 'gateway-load-shedding', dependencies: ['gateway-authenticate', 'gateway-config', 'gateway-clock'] })
