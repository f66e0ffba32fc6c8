// Liveness that tells the truth (issue 39): the admin port's /healthz answered 200 while the public
// listener answered nothing, so no orchestrator restarted a wedged gateway. What can wedge a gateway
// whose admin port still answers, and what is checked here:
// - the event loop: a turn longer than `loopStallMs` (a synchronous write to a blocked pipe, a
//   runaway computation) within the last `loopWindowMs`. A loop blocked for good answers no probe at
//   all, which fails it too; a stall that is over fails it for one window only, so only stalls that
//   recur outlast the probe's failureThreshold (docs/operations.md);
// - the upstream gate: every backend connection held, requests waiting or turned away, and none given
//   back for `upstreamStallMs` — longer than any request may hold one (the upstream budget bounds the
//   wait for an answer), so only a gate that leaked or is stuck trips it.
// /healthz fails (503) while either holds; /readyz carries the same check, named `serving`, and says why.
import { performance } from 'node:perf_hooks'
import fp from 'fastify-plugin'
import type { ReadinessRegistry } from './readiness.js'

/**
 * A turn of the event loop longer than this is a stall (ms): far beyond any turn of a serving
 * gateway (a request's work is well under a millisecond), long enough that a CPU-starved host's
 * slow turns (a config parse, a large GC) do not count.
 */
export const DEFAULT_LOOP_STALL_MS = 5_000
/** A stall fails liveness for this long after it ended (ms). */
export const DEFAULT_LOOP_WINDOW_MS = 10_000
/** Every backend connection held and none given back this long, with requests waiting: the gate is wedged (ms). */
export const DEFAULT_UPSTREAM_STALL_MS = 30_000
/** How often the loop watchdog's timer is due (ms). */
const LOOP_TICK_MS = 250

export interface LivenessOptions {
  loopStallMs?: number
  loopWindowMs?: number
  upstreamStallMs?: number
}

/** What the upstream gate tells liveness (proxy/upstream-gate.ts). */
export interface UpstreamProgress {
  /** How long the gate has been full, with requests waiting or turned away, without a connection given back (ms); 0 when it is not. */
  stalledMs: (now: number) => number
}

export interface LivenessCheck {
  ok: boolean
  error?: string
  [detail: string]: unknown
}

export interface LivenessReport {
  live: boolean
  checks: { loop: LivenessCheck, upstream: LivenessCheck }
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The gateway's liveness, read by the admin app's /healthz. */
    liveness: { report: () => LivenessReport }
  }
}

export interface LivenessPluginOptions extends LivenessOptions {
  readiness: ReadinessRegistry
}

/** The loop watchdog and the verdict, apart from Fastify (tests drive it with their own clock). */
export class Liveness {
  readonly #loopStallMs: number
  readonly #loopWindowMs: number
  readonly #upstreamStallMs: number
  readonly #now: () => number
  #lastTickAt: number
  /** The longest turn within the window, and when it ended. */
  #stallMs = 0
  #stallEndedAt = -Infinity

  constructor (opts: LivenessOptions, now: () => number = () => performance.now()) {
    this.#loopStallMs = opts.loopStallMs ?? DEFAULT_LOOP_STALL_MS
    this.#loopWindowMs = opts.loopWindowMs ?? DEFAULT_LOOP_WINDOW_MS
    this.#upstreamStallMs = opts.upstreamStallMs ?? DEFAULT_UPSTREAM_STALL_MS
    this.#now = now
    this.#lastTickAt = now()
  }

  /** The watchdog's timer fired: the time since the last one, beyond its period, was the loop's. */
  tick (): void {
    const now = this.#now()
    const turnMs = now - this.#lastTickAt - LOOP_TICK_MS
    this.#lastTickAt = now
    if (turnMs > this.#loopStallMs && (turnMs >= this.#stallMs || now - this.#stallEndedAt > this.#loopWindowMs)) {
      this.#stallMs = turnMs
      this.#stallEndedAt = now
    }
  }

  report (upstream: UpstreamProgress | undefined): LivenessReport {
    const now = this.#now()
    // The watchdog itself late (the loop busy all along, the probe's request served first).
    const sinceTick = now - this.#lastTickAt - LOOP_TICK_MS
    let loop: LivenessCheck = { ok: true }
    if (sinceTick > this.#loopStallMs) {
      loop = { ok: false, error: `the event loop has not turned for ${Math.round(sinceTick)} ms (limit ${this.#loopStallMs} ms)` }
    } else if (now - this.#stallEndedAt <= this.#loopWindowMs) {
      loop = { ok: false, error: `the event loop stalled for ${Math.round(this.#stallMs)} ms ${Math.round(now - this.#stallEndedAt)} ms ago (limit ${this.#loopStallMs} ms; fails for ${this.#loopWindowMs} ms after a stall)` }
    }
    const stalledMs = upstream?.stalledMs(now) ?? 0
    const upstreamCheck: LivenessCheck = stalledMs > this.#upstreamStallMs
      ? { ok: false, error: `every backend connection held and none given back for ${Math.round(stalledMs)} ms while requests wait (limit ${this.#upstreamStallMs} ms)` }
      : { ok: true }
    return { live: loop.ok && upstreamCheck.ok, checks: { loop, upstream: upstreamCheck } }
  }

  get tickMs (): number {
    return LOOP_TICK_MS
  }
}

export const livenessPlugin = fp<LivenessPluginOptions>(async function livenessPlugin (app, opts) {
  // Until then only the gate is judged.
  let liveness = new Liveness({ ...opts, loopStallMs: Infinity })
  let timer: NodeJS.Timeout | undefined
  // Watched from the moment the listener serves: start-up's long turns (module loading, schema
  // compilation) are the startup probe's business, not a stall.
  app.addHook('onListen', function watchLoop (done) {
    liveness = new Liveness(opts)
    timer = setInterval(() => { liveness.tick() }, liveness.tickMs)
    timer.unref()
    done()
  })
  app.addHook('onClose', async () => { clearInterval(timer) })
  // The proxy registers after this plugin: its gate is looked up when asked.
  const upstream = (): UpstreamProgress | undefined => app.hasDecorator('upstream') ? app.upstream : undefined
  const report = (): LivenessReport => liveness.report(upstream())
  app.decorate('liveness', { report })
  opts.readiness.register('serving', async () => {
    const { live, checks } = report()
    if (!live) throw new Error([checks.loop.error, checks.upstream.error].filter((e) => e !== undefined).join('; '))
  })
}, { name: 'gateway-liveness' })
