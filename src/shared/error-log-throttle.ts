// One log line per kind of unexpected error per interval, not one per request: a fault that hits
// every request (or an attacker who found one) would otherwise write a stack trace per request —
// 3,200 lines and 3.3 MB for 100 reset pipelines — and the log becomes the bottleneck. The first
// error of a kind is logged whole; the next line of that kind, an interval later at the earliest,
// says how many were left out in between. Both services' error handlers use it
// (src/interface/errors.ts); the requests themselves are still counted in the metrics.

/** How long after a kind's line the next error of that kind is logged again (ms). */
export const DEFAULT_ERROR_LOG_INTERVAL_MS = 60_000
/** Kinds remembered at most; past it, new kinds share one entry (a bounded map whatever the errors say). */
export const MAX_ERROR_KINDS = 100
const OTHER_KINDS = '(other kinds)'
const KIND_MESSAGE_CHARS = 200

interface KindState {
  /** When this kind may be logged again. */
  quietUntil: number
  /** Errors of this kind not logged since its last line. */
  suppressed: number
}

export interface ErrorLogVerdict {
  /** Log this one. */
  readonly log: boolean
  /** Errors of its kind left out since the last line of the kind (0 for the first). */
  readonly suppressed: number
}

/** The kind of an error: its class, its code, and the start of its message. */
export function errorKind (err: unknown): string {
  if (!(err instanceof Error)) return typeof err
  const code = (err as { code?: unknown }).code
  return `${err.name}:${typeof code === 'string' ? code : ''}:${err.message.slice(0, KIND_MESSAGE_CHARS)}`
}

export class ErrorLogThrottle {
  readonly #kinds = new Map<string, KindState>()

  private readonly intervalMs: number
  private readonly now: () => number

  constructor (intervalMs = DEFAULT_ERROR_LOG_INTERVAL_MS, now: () => number = Date.now) {
    this.intervalMs = intervalMs
    this.now = now
  }

  /** Whether to log `err` now, and how many of its kind were left out since its last line. */
  admit (err: unknown): ErrorLogVerdict {
    const now = this.now()
    const state = this.#stateOf(errorKind(err), now)
    if (now < state.quietUntil) {
      state.suppressed++
      return { log: false, suppressed: state.suppressed }
    }
    const suppressed = state.suppressed
    state.suppressed = 0
    state.quietUntil = now + this.intervalMs
    return { log: true, suppressed }
  }

  #stateOf (kind: string, now: number): KindState {
    const known = this.#kinds.get(kind)
    if (known !== undefined) return known
    if (this.#kinds.size >= MAX_ERROR_KINDS) {
      // Forget the kinds that are quiet again and left nothing out; if none is, share one entry.
      for (const [k, s] of this.#kinds) if (now >= s.quietUntil && s.suppressed === 0) this.#kinds.delete(k)
      if (this.#kinds.size >= MAX_ERROR_KINDS) kind = OTHER_KINDS
    }
    let state = this.#kinds.get(kind)
    if (state === undefined) {
      state = { quietUntil: 0, suppressed: 0 }
      this.#kinds.set(kind, state)
    }
    return state
  }
}
