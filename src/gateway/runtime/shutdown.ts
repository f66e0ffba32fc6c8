// Graceful stop of the public listener, in the order a load balancer needs: readiness fails first
// (and, for an optional drain delay, the listener keeps serving while every response says
// `Connection: close`), then the listener stops accepting, requests already in flight finish within
// a bounded grace period (connections still open after it are cut), and only then do the onClose
// hooks close the backend pool and Redis. A request arriving on a kept-alive connection while the
// listener closes is answered 503 `unavailable` in the Error shape (Fastify's own 503 is not).
import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { gatewayErrors } from '../../interface/errors.js'
import { holdUntilOver } from '../edge/request-holds.js'
import type { ReadinessRegistry } from './readiness.js'

export interface DrainState {
  /** Requests received and not yet answered (or aborted). */
  readonly inFlight: number
  /** True once the listener is closing. */
  readonly closing: boolean
}

declare module 'fastify' {
  interface FastifyInstance {
    drain: DrainState
  }
}

export interface ShutdownPluginOptions {
  readiness: ReadinessRegistry
}

export const shutdownPlugin = fp<ShutdownPluginOptions>(async function shutdownPlugin (app, { readiness }) {
  const state = { inFlight: 0, closing: false }
  app.decorate('drain', {
    get inFlight () { return state.inFlight },
    get closing () { return state.closing }
  })
  app.addHook('preClose', function markClosing (done) {
    state.closing = true
    done()
  })
  app.addHook('onRequest', function refuseWhileClosing (request, reply, done) {
    state.inFlight++
    holdUntilOver(reply.raw, () => { state.inFlight-- })
    if (state.closing) {
      reply.header('connection', 'close')
      done(gatewayErrors.unavailable('The gateway is shutting down'))
      return
    }
    done()
  })
  app.addHook('onSend', function closeWhileDraining (_request, reply, payload, done) {
    // Clients leave this instance's kept-alive connections before it stops accepting.
    if (state.closing || readiness.draining) reply.header('connection', 'close')
    done(null, payload)
  })
}, { name: 'gateway-shutdown' })

export interface StopOptions {
  /** The registry the admin app's /readyz reads: it fails first. */
  readiness: ReadinessRegistry
  drainDelayMs: number
  /** Bound on in-flight requests after the listener stops accepting. */
  graceMs: number
  log: FastifyBaseLogger
}

const sleep = async (ms: number): Promise<void> => { await new Promise((resolve) => setTimeout(resolve, ms)) }

/** Runs the whole stop sequence of the public app (not the admin app: it keeps answering /readyz 503 meanwhile). */
export async function stopGateway (gateway: FastifyInstance, opts: StopOptions): Promise<void> {
  const started = Date.now()
  opts.readiness.drain()
  if (opts.drainDelayMs > 0) {
    opts.log.info({ drainDelayMs: opts.drainDelayMs }, 'readiness failing; serving until the drain delay ends')
    await sleep(opts.drainDelayMs)
  }
  opts.log.info({ inFlight: gateway.drain.inFlight, graceMs: opts.graceMs }, 'listener closing; draining in-flight requests')
  let forced = false
  const deadline = setTimeout(() => {
    forced = true
    opts.log.warn({ inFlight: gateway.drain.inFlight }, 'drain deadline reached; closing the connections still open')
    gateway.server.closeAllConnections()
  }, opts.graceMs)
  try {
    await gateway.close()
  } finally {
    clearTimeout(deadline)
  }
  opts.log.info({ durationMs: Date.now() - started, forced }, 'drain finished')
}
