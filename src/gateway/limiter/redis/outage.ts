// What answers while a shard does not (STORE_ON_ERROR), once units already counted have run out:
// `local` — this process's reserve, kept back in Redis for it, then the outage allowance (a stated share of
// the consumer's limit, counted here and written back when the shard answers); `strict` — the reserve only
// (never over a limit); `open` — admitted, nothing counted; `closed` — refused. A request nothing can answer
// is refused with StoreUnavailableError, which the limiter answers 503 `unavailable` with Retry-After.
// The bound of each is in docs/limiter-internals.md.

export const STORE_ON_ERROR_POLICIES = ['local', 'strict', 'open', 'closed'] as const
export type StoreOnError = (typeof STORE_ON_ERROR_POLICIES)[number]
export const DEFAULT_STORE_ON_ERROR: StoreOnError = 'local'
/** STORE_OUTAGE_ALLOWANCE_PERCENT: the share (%) of a consumer's minute limit all processes together may admit uncounted in an outage. */
export const DEFAULT_OUTAGE_ALLOWANCE_PERCENT = 10
/** STORE_PROCESSES: the gateway processes sharing one Redis (default GATEWAY_WORKERS); each gets the allowance ÷ this. */
export const DEFAULT_STORE_PROCESSES = 1

/** The outage allowance: `share` of a minute limit for all `processes` together (share 0: none). */
export interface OutageAllowance { readonly share: number, readonly processes: number }

/** Units of the allowance one process may admit for a consumer with `perMinute` (per rolling minute, and uncounted at once). */
export function allowanceUnits (allowance: OutageAllowance, perMinute: number): number {
  return Math.floor(perMinute * allowance.share / Math.max(1, allowance.processes))
}

export class StoreUnavailableError extends Error {
  constructor (reason: string) {
    super(reason)
    this.name = 'StoreUnavailableError'
  }
}

/** Node's timers, unref'd (nothing of the limiter keeps a process alive), as Runtime.after. */
export function unrefAfter (ms: number, fn: () => void): () => void {
  const timer = setTimeout(fn, ms)
  timer.unref()
  return () => { clearTimeout(timer) }
}

/** `call`, or StoreUnavailableError once it has taken `ms` (on real timers unless `after` is given). */
export function withinBudget<T> (call: Promise<T>, ms: number, after: (ms: number, fn: () => void) => () => void = unrefAfter): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const cancel = after(ms, () => { reject(new StoreUnavailableError(`limiter store did not answer within ${ms} ms`)) })
    call.then((value) => { cancel(); resolve(value) }, (error: unknown) => { cancel(); reject(error instanceof Error ? error : new Error(String(error))) })
  })
}
