// One circuit breaker per shard of the store (a Cluster master; one for standalone Redis), so a
// lost node sends only its own keys to the fallback while the others keep counting in Redis. A
// breaker opens after `failures` consecutive failed calls (a lone slow reply does not switch a
// process), or at once when the shard's connection drops (what it held may be gone when it comes
// back). While it is open every call is refused, and the breaker probes the shard by itself — a
// timer, never a request: the first probe soon, then backing off to one per cool-down, and at once
// when the connection is ready again. Only an answered probe closes it (the resilient store's probe
// verifies the shard's data and writes the fallback's admissions back first), so no request is
// kept waiting on a probe and no ban cached in the gateway can keep a breaker from closing.
import type { Progress } from './bounded-call.js'

/** Consecutive failed calls that open a breaker. */
export const DEFAULT_BREAKER_FAILURES = 3
/** Open breaker: the longest wait between two probes. */
export const DEFAULT_BREAKER_COOLDOWN_MS = 1_000
/** Open breaker: the first probe's delay, doubled after each failed probe up to the cool-down. */
export const DEFAULT_FIRST_PROBE_MS = 100
/**
 * A Cluster shard whose open breaker no request has asked for during this many cool-downs no longer
 * owns slots (failover moved them to a replica, which gets a breaker of its own): it is forgotten,
 * so the fallback gauge does not stay at 1 for a node that left.
 */
export const STALE_SHARD_COOLDOWNS = 10

export interface Breaker extends Progress {
  readonly shard: string
  /** Consecutive failed calls. */
  failures: number
  open: boolean
  probing: boolean
  /** Clock ms of the first failure since the shard last answered; undefined: none. */
  failedSince: number | undefined
  /** Clock ms a request last asked for this shard. */
  askedAt: number
  /** The next probe's delay. */
  backoff: number
  timer: NodeJS.Timeout | undefined
}

export interface BreakerOptions {
  failures?: number
  coolDownMs?: number
  firstProbeMs?: number
  /** Clock ms (default Date.now). */
  now?: () => number
  /** Called when the first breaker opens (true) and when none is open any more (false). */
  onChange?: (open: boolean) => void
  /** Probes `shard`: resolves when it answers (the breaker closes), rejects otherwise. Default: closes at the first probe. */
  probe?: (shard: string) => Promise<void>
}

/** How a call may reach its shard now. */
export type Passage = 'call' | 'refused'

export interface Breakers {
  /** The breaker of `shard` ('' : the one of an unsharded store). */
  of: (shard: string) => Breaker
  /** Closed: `call`; open: `refused`. */
  pass: (breaker: Breaker) => Passage
  /** A call answered (true) or failed (false). An answer while open changes nothing: only a probe closes. */
  settle: (breaker: Breaker, ok: boolean) => void
  /** The shard's connection dropped: open now, probe as soon as it may answer. */
  suspect: (breaker: Breaker) => void
  /** The shard's connection is ready again: an open breaker probes now. */
  nudge: (breaker: Breaker) => void
  /** True while `breaker` is open. */
  refusing: (breaker: Breaker) => boolean
  /** Every breaker known. */
  all: () => Breaker[]
  /** True while any breaker is open. Changes nothing. */
  anyOpen: () => boolean
  /** Forgets the open breakers of shards no request has asked for during STALE_SHARD_COOLDOWNS cool-downs (run by a timer while any is open). */
  sweepStale: () => void
  /** Stops the timers. */
  close: () => void
}

export function createBreakers (opts: BreakerOptions = {}): Breakers {
  const limit = opts.failures ?? DEFAULT_BREAKER_FAILURES
  const coolDownMs = opts.coolDownMs ?? DEFAULT_BREAKER_COOLDOWN_MS
  const firstProbeMs = Math.min(coolDownMs, opts.firstProbeMs ?? DEFAULT_FIRST_PROBE_MS)
  const now = opts.now ?? Date.now
  const probe = opts.probe ?? (async () => {})
  const breakers = new Map<string, Breaker>()
  let openCount = 0
  let sweeper: NodeJS.Timeout | undefined
  let closed = false

  function schedule (breaker: Breaker, delay: number): void {
    clearTimeout(breaker.timer)
    if (closed) return
    breaker.timer = setTimeout(() => { void probeNow(breaker) }, delay)
    breaker.timer.unref()
  }

  async function probeNow (breaker: Breaker): Promise<void> {
    if (!breaker.open || breaker.probing || closed) return
    breaker.probing = true
    try {
      await probe(breaker.shard)
    } catch {
      breaker.backoff = Math.min(coolDownMs, breaker.backoff * 2)
      schedule(breaker, breaker.backoff)
      return
    } finally {
      breaker.probing = false
    }
    shut(breaker)
  }

  function open (breaker: Breaker, firstProbe: number): void {
    breaker.failedSince ??= now()
    if (!breaker.open) {
      breaker.open = true
      breaker.backoff = firstProbeMs
      if (openCount++ === 0) {
        opts.onChange?.(true)
        sweeper = setInterval(sweepStale, coolDownMs)
        sweeper.unref()
      }
    }
    if (!breaker.probing) schedule(breaker, firstProbe)
  }

  function shut (breaker: Breaker): void {
    breaker.failures = 0
    breaker.failedSince = undefined
    clearTimeout(breaker.timer)
    if (!breaker.open) return
    breaker.open = false
    if (breakers.get(breaker.shard) === breaker) released()
  }

  function released (): void {
    if (--openCount > 0) return
    clearInterval(sweeper)
    sweeper = undefined
    opts.onChange?.(false)
  }

  function sweepStale (): void {
    const stale = now() - STALE_SHARD_COOLDOWNS * coolDownMs
    for (const [shard, breaker] of breakers) {
      if (shard !== '' && breaker.open && !breaker.probing && breaker.askedAt < stale) {
        breakers.delete(shard)
        clearTimeout(breaker.timer)
        released()
      }
    }
  }

  return {
    of (shard) {
      let breaker = breakers.get(shard)
      if (breaker === undefined) {
        breaker = { shard, failures: 0, open: false, probing: false, failedSince: undefined, askedAt: now(), backoff: firstProbeMs, timer: undefined, lastReplyAt: 0 }
        breakers.set(shard, breaker)
      }
      return breaker
    },
    pass (breaker) {
      breaker.askedAt = now()
      return breaker.open ? 'refused' : 'call'
    },
    settle (breaker, ok) {
      if (ok) {
        if (!breaker.open) {
          breaker.failures = 0
          breaker.failedSince = undefined
        }
        return
      }
      breaker.failedSince ??= now()
      if (++breaker.failures >= limit) open(breaker, firstProbeMs)
    },
    suspect: (breaker) => { open(breaker, 0) },
    nudge (breaker) {
      if (breaker.open && !breaker.probing) schedule(breaker, 0)
    },
    refusing: (breaker) => breaker.open,
    all: () => [...breakers.values()],
    anyOpen: () => openCount > 0,
    sweepStale,
    close () {
      closed = true
      clearInterval(sweeper)
      sweeper = undefined
      for (const breaker of breakers.values()) clearTimeout(breaker.timer)
    }
  }
}
