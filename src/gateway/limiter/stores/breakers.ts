// One circuit breaker per shard of the store (a Cluster master; one for standalone Redis), so a
// lost node sends only its own keys to the fallback while the others keep counting in Redis. A
// breaker opens after `failures` consecutive failed calls (a lone slow reply does not switch a
// process); while open, calls are refused until the cool-down ends, then one call probes the shard
// and its answer closes the breaker or restarts the cool-down.
import type { Progress } from './bounded-call.js'

/** Consecutive failed calls that open a breaker. */
export const DEFAULT_BREAKER_FAILURES = 3
/** Open breaker: how long before one call probes the shard again. */
export const DEFAULT_BREAKER_COOLDOWN_MS = 1_000
/**
 * A Cluster shard whose open breaker no request has probed for this many cool-downs no longer owns
 * slots (failover moved them to a replica, which gets a breaker of its own): it is forgotten, so
 * the fallback gauge does not stay at 1 for a node that left.
 */
export const STALE_SHARD_COOLDOWNS = 10

export interface Breaker extends Progress {
  /** Consecutive failed calls. */
  failures: number
  open: boolean
  /** While open: when one call may probe again. */
  probeAt: number
  probing: boolean
}

export interface BreakerOptions {
  failures?: number
  coolDownMs?: number
  /** Clock ms (default Date.now). */
  now?: () => number
  /** Called when the first breaker opens (true) and when none is open any more (false). */
  onChange?: (open: boolean) => void
}

/** How a call may reach its shard now. */
export type Passage = 'call' | 'probe' | 'refused'

export interface Breakers {
  /** The breaker of `shard` ('' : the one of an unsharded store). */
  of: (shard: string) => Breaker
  /** Closed: `call`; open and its cool-down over with no probe under way: `probe` (the caller probes, and must `settle`); else `refused`. */
  pass: (breaker: Breaker) => Passage
  /** A call that went through answered (true) or failed (false); `probe` as `pass` gave it. */
  settle: (breaker: Breaker, ok: boolean, passage: Passage) => void
  /** True while `breaker` is open and in its cool-down. */
  refusing: (breaker: Breaker) => boolean
  /** Every breaker known. */
  all: () => Breaker[]
  /** True while any breaker is open. Changes nothing. */
  anyOpen: () => boolean
  /** Forgets the open breakers of shards no request has probed for STALE_SHARD_COOLDOWNS cool-downs (run by a timer while any is open). */
  sweepStale: () => void
  /** Stops the sweep timer. */
  close: () => void
}

export function createBreakers (opts: BreakerOptions = {}): Breakers {
  const limit = opts.failures ?? DEFAULT_BREAKER_FAILURES
  const coolDownMs = opts.coolDownMs ?? DEFAULT_BREAKER_COOLDOWN_MS
  const now = opts.now ?? Date.now
  const breakers = new Map<string, Breaker>()
  let openCount = 0
  let sweeper: NodeJS.Timeout | undefined

  function opened (): void {
    if (openCount++ > 0) return
    opts.onChange?.(true)
    sweeper = setInterval(sweepStale, coolDownMs)
    sweeper.unref()
  }

  function closed (): void {
    if (--openCount > 0) return
    clearInterval(sweeper)
    sweeper = undefined
    opts.onChange?.(false)
  }

  function sweepStale (): void {
    const stale = now() - STALE_SHARD_COOLDOWNS * coolDownMs
    for (const [shard, breaker] of breakers) {
      if (shard !== '' && breaker.open && !breaker.probing && breaker.probeAt < stale) {
        breakers.delete(shard)
        closed()
      }
    }
  }

  return {
    of (shard) {
      let breaker = breakers.get(shard)
      if (breaker === undefined) {
        breaker = { failures: 0, open: false, probeAt: 0, probing: false, lastReplyAt: 0 }
        breakers.set(shard, breaker)
      }
      return breaker
    },
    pass (breaker) {
      if (!breaker.open) return 'call'
      if (breaker.probing || now() < breaker.probeAt) return 'refused'
      breaker.probing = true
      return 'probe'
    },
    settle (breaker, ok, passage) {
      if (passage === 'probe') breaker.probing = false
      if (ok) {
        breaker.failures = 0
        if (breaker.open) {
          breaker.open = false
          closed()
        }
        return
      }
      breaker.failures++
      if (!breaker.open && breaker.failures >= limit) {
        breaker.open = true
        opened()
      }
      if (breaker.open) breaker.probeAt = now() + coolDownMs
    },
    refusing: (breaker) => breaker.open && now() < breaker.probeAt,
    all: () => [...breakers.values()],
    anyOpen: () => openCount > 0,
    sweepStale,
    close () {
      clearInterval(sweeper)
      sweeper = undefined
    }
  }
}
