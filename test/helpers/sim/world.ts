// The simulator's world: one virtual clock, one event queue, one seeded random stream. Everything
// that happens — a request arriving, a command reaching the modelled Redis, a reply, a timer of a
// gateway process — is an event at a virtual instant; events run one at a time in (time, phase,
// sequence) order, each followed by a fixed number of microtask turns so the promise chains it
// started settle before the next event (deterministic either way: the microtask queue is FIFO). Turns
// left once the queue holds nothing but the world's own are not taken: nothing could run in them.
// Same seed, same run: a failing seed replays exactly.

import { promiseHooks } from 'node:v8'

/** Within one instant, timers run before I/O and I/O before end-of-turn work (Node's loop phases). */
export type Phase = 0 | 1 | 2
export const TIMER: Phase = 0
export const IO: Phase = 1
export const CHECK: Phase = 2

interface Event {
  t: number
  phase: Phase
  seq: number
  fn: () => void
  owner: Owner | undefined
  cancelled: boolean
}

/** Something whose events can be held up (a gateway process with a blocked event loop) or dropped (a crashed one). */
export interface Owner {
  busyUntil: number
  dead: boolean
}

/** A small, fast, seeded PRNG (mulberry32). */
export function prng (seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let x = Math.imul(s ^ (s >>> 15), 1 | s)
    x ^= x + Math.imul(x ^ (x >>> 7), 61 | x)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

const MICROTASK_TURNS = 24

/**
 * What a microtask turn awaits: a promise already resolved. `await` of a native promise takes one turn, as `await
 * undefined` does, so the order is the same; but `await undefined` first wraps the value in a new promise, and under
 * tap every promise created runs its async-hook domain's init and destroy tracking (in the simulator files about a
 * third of the CPU went to them): one promise fewer per turn, and the chains the events start descend from this
 * promise, made outside any test's domain, so the domain's init has nothing to record for them.
 */
const TURN = Promise.resolve()

export class World {
  now: number
  readonly random: () => number
  private readonly heap: Event[] = []
  private seq = 0

  constructor (seed: number, start: number) {
    this.random = prng(seed)
    this.now = start
  }

  /** A random number in [a, b). */
  between (a: number, b: number): number {
    return a + (b - a) * this.random()
  }

  chance (p: number): boolean {
    return this.random() < p
  }

  /** Runs `fn` at virtual instant `t` (not before now); the returned function cancels it. */
  at (t: number, fn: () => void, owner?: Owner, phase: Phase = IO): () => void {
    const event: Event = { t: Math.max(t, this.now), phase, seq: this.seq++, fn, owner, cancelled: false }
    this.push(event)
    return () => { event.cancelled = true }
  }

  /**
   * Runs every event up to virtual instant `until`. After each event, up to MICROTASK_TURNS turns: a turn in which
   * no other job ran (the promise hook counted only the world's own) found the microtask queue empty — every job
   * queued before the world's turn runs before it, and none ran to queue more — so the turns left would run alone,
   * one after another, and the next event comes at once: the same order as taking them. (Every job that the
   * simulated code queues is a promise's: V8 runs the hook for each; a queueMicrotask callback it does not see,
   * and the simulator and the limiter's Redis path queue none.)
   */
  async run (until: number): Promise<void> {
    let jobs = 0
    const stopCounting = promiseHooks.onBefore(() => { jobs++ })
    try {
      while (this.heap.length > 0 && this.heap[0]!.t <= until) {
        const event = this.pop()
        if (event.cancelled || event.owner?.dead === true) continue
        if (event.owner !== undefined && event.owner.busyUntil > event.t) {
          event.t = event.owner.busyUntil
          this.push(event)
          continue
        }
        this.now = event.t
        event.fn()
        for (let i = 0; i < MICROTASK_TURNS; i++) {
          const before = jobs
          await TURN
          if (jobs === before + 1) break
        }
      }
    } finally {
      stopCounting()
    }
    this.now = Math.max(this.now, until)
  }

  private less (a: Event, b: Event): boolean {
    return a.t !== b.t ? a.t < b.t : a.phase !== b.phase ? a.phase < b.phase : a.seq < b.seq
  }

  private push (e: Event): void {
    const h = this.heap
    h.push(e)
    let i = h.length - 1
    while (i > 0) {
      const p = (i - 1) >> 1
      if (!this.less(h[i]!, h[p]!)) break
      ;[h[i], h[p]] = [h[p]!, h[i]!]
      i = p
    }
  }

  private pop (): Event {
    const h = this.heap
    const top = h[0]!
    const last = h.pop()!
    if (h.length > 0) {
      h[0] = last
      let i = 0
      for (;;) {
        const l = 2 * i + 1
        const r = l + 1
        let m = i
        if (l < h.length && this.less(h[l]!, h[m]!)) m = l
        if (r < h.length && this.less(h[r]!, h[m]!)) m = r
        if (m === i) break
        ;[h[i], h[m]] = [h[m]!, h[i]!]
        i = m
      }
    }
    return top
  }
}
