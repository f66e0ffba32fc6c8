// What answers a decision while Redis fails (STORE_ON_ERROR): `local` — this process, from what it
// knew of the consumer and its share of the room left (local-fallback.ts); `open` — admitted,
// nothing counted; `closed` — refused, the limiter answers 503. Admin reads and writes never fall
// back (a local answer would mislead ops).
import type { BanPolicy, Limits } from '../../config/types.js'
import { DAY_WINDOW, MINUTE_WINDOW, type WindowSpec } from '../arithmetic.js'
import type { StoreState } from '../store-health.js'
import type { ConsumeResult, WindowState } from '../store.js'
import type { LocalFallback } from './local-fallback.js'

/** STORE_ON_ERROR's policies. */
export const STORE_ON_ERROR_POLICIES = ['local', 'open', 'closed'] as const
export type StoreOnError = (typeof STORE_ON_ERROR_POLICIES)[number]
export const DEFAULT_STORE_ON_ERROR: StoreOnError = 'local'

/** Thrown under the `closed` policy while Redis is failing: the limiter answers 503 `unavailable`. */
export class StoreUnavailableError extends Error {
  constructor (reason: string) {
    super(reason)
    this.name = 'StoreUnavailableError'
  }
}

export interface FallbackPolicy {
  readonly policy: StoreOnError
  /** The answer to a consume that Redis could not give, `reason` being why; `late`: the request's script, still queued in Redis. */
  consume: (id: string, limits: Limits, ban: BanPolicy | null, reason: string, late?: Promise<ConsumeResult>) => Promise<ConsumeResult>
  /** The answer to a peek that Redis could not give. */
  peek: (id: string, limits: Limits, reason: string) => Promise<ConsumeResult>
  /** Readiness while Redis fails: `fallback` while requests are still answered; throws under `closed`. */
  state: (reason: string) => StoreState
}

function emptyWindow (spec: WindowSpec, now: number): WindowState {
  return { count: 0, resetAt: (Math.floor(now / spec.bucketMs) + spec.slots) * spec.bucketMs, retryAt: 0 }
}

/** What `open` answers: admitted, nothing known about the windows (headers show the full limits). */
function admitted (now: number): ConsumeResult {
  return { outcome: 'ok', now, minute: emptyWindow(MINUTE_WINDOW, now), day: emptyWindow(DAY_WINDOW, now), bannedUntil: 0 }
}

/** `now`: the gateway clock (Unix ms), for the `open` answer. */
export function createFallbackPolicy (policy: StoreOnError, local: LocalFallback, now: () => number): FallbackPolicy {
  return {
    policy,
    async consume (id, limits, ban, reason, late) {
      if (policy === 'local') return await local.consume(id, limits, ban, late)
      if (policy === 'open') return admitted(now())
      throw new StoreUnavailableError(reason)
    },
    async peek (id, limits, reason) {
      if (policy === 'local') return await local.peek(id, limits)
      if (policy === 'open') return admitted(now())
      throw new StoreUnavailableError(reason)
    },
    state (reason) {
      if (policy === 'closed') throw new StoreUnavailableError(`down: ${reason}`)
      return 'fallback'
    }
  }
}
