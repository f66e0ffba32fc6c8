// Load shedding at the edge: when the gateway holds more requests than it can serve promptly, the
// excess is answered 503 at once instead of queueing — behind it, every request (a well-behaved
// client's too) would wait for the whole queue (issue 26, finding 3). Docs: docs/decisions.md §7.
//
// - Signal: the gateway's own queueing delay, over short windows, from the two places a request
//   waits in it: its socket's buffer, for about one turn of the event loop (the loop's median delay),
//   and the upstream gate, for a backend connection (the standing queue's delay, CoDel's measure: a
//   burst that drains does not count). Whichever is longer.
// - Actuator: a limit on requests in flight through the gateway (concurrency-limit.ts). Nothing is
//   shed until the delay has stayed over its target for a whole interval with more requests in the
//   gateway than the backend takes (a standing queue, not a burst that drains); from then on the
//   limit is adapted each window (AIMD): cut while the delay is over target, raised when the limit
//   was reached and the delay is under it — doubled while far under. Never below the backend's
//   connections; an interval under target without reaching it ends the shedding.
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
import { ConcurrencyLimit, DEFAULT_SHED_WINDOW_MS } from './concurrency-limit.js'
import { holdConnection } from './pipeline-gate.js'
import { holdUntilOver } from './request-holds.js'

/** The queueing delay (ms) the gateway keeps under overload (loop delay, standing wait for a backend connection); 0 turns load shedding off. */
export const DEFAULT_SHED_QUEUE_DELAY_MS = 10
/** Retry-After of a shed request, and how long its connection is left unread. */
export const DEFAULT_SHED_RETRY_AFTER_SECONDS = 1
/** Sampling interval of the loop-delay monitor (ms): its timer fires once per turn at most. */
const LOOP_DELAY_RESOLUTION_MS = 5
/** Holds last from (1 − this) × Retry-After to Retry-After. */
const HOLD_SPREAD = 0.5

export interface LoadSheddingOptions {
  /** Target queueing delay (ms); 0: no shedding. */
  queueDelayMs?: number
  windowMs?: number
  /** How long the delay must stay over target before anything is shed (ms). */
  intervalMs?: number
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
  const windowMs = opts.windowMs ?? DEFAULT_SHED_WINDOW_MS
  const limiter = new ConcurrencyLimit({ targetMs: target, minLimit: opts.minLimit, windowMs, intervalMs: opts.intervalMs })
  let delays = { loop: 0, upstream: 0 }
  app.decorate('loadShedding', {
    get inFlight () { return limiter.inFlight },
    get limit () { return limiter.limit },
    get shed () { return limiter.shed },
    get delays () { return delays }
  })

  const monitor = opts.loopDelay === undefined ? monitoredLoopDelay() : undefined
  const loopDelay = opts.loopDelay ?? monitor?.read ?? (() => 0)
  // The proxy registers after this plugin: its gate is looked up when a window ends.
  const standingDelay = (): number => app.hasDecorator('upstream') ? app.upstream.takeStandingDelayMs() : 0
  const timer = setInterval(() => {
    delays = { loop: loopDelay(), upstream: standingDelay() }
    limiter.adapt(Math.max(delays.loop, delays.upstream))
  }, windowMs)
  timer.unref()
  app.addHook('onClose', async () => {
    clearInterval(timer)
    monitor?.stop()
  })

  const retryAfterMs = DEFAULT_SHED_RETRY_AFTER_SECONDS * 1000
  app.addHook('onRequest', function shedOverload (request, reply, done) {
    const client = clientOf(request)
    if (limiter.admit(client)) {
      holdUntilOver(reply.raw, () => { limiter.done(client) })
      done()
      return
    }
    // Held from now: the connection's next request must not start as soon as this answer is written.
    holdConnection(request.raw.socket, holdMs(retryAfterMs))
    const limits = request.consumer?.limits ?? request.snapshot.anonymous
    done(gatewayErrors.overloaded(DEFAULT_SHED_RETRY_AFTER_SECONDS, unavailableHeaders(limits, app.clock())))
  })
}, { name: 'gateway-load-shedding', dependencies: ['gateway-authenticate', 'gateway-config', 'gateway-clock'] })
