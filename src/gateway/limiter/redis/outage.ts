// What answers while a shard does not (STORE_ON_ERROR), once units already counted have run out:
// `local` — this process's reserve, kept back in Redis for it; `open` — admitted, nothing counted;
// `closed` — refused. A request nothing can answer is refused with StoreUnavailableError, which the
// limiter answers 503 `unavailable` with Retry-After.

export const STORE_ON_ERROR_POLICIES = ['local', 'open', 'closed'] as const
export type StoreOnError = (typeof STORE_ON_ERROR_POLICIES)[number]
export const DEFAULT_STORE_ON_ERROR: StoreOnError = 'local'

export class StoreUnavailableError extends Error {
  constructor (reason: string) {
    super(reason)
    this.name = 'StoreUnavailableError'
  }
}

/** `call`, or StoreUnavailableError once it has taken `ms` (ops calls and probes: real timers). */
export function withinBudget<T> (call: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => { reject(new StoreUnavailableError(`limiter store did not answer within ${ms} ms`)) }, ms)
    timer.unref()
    call.then((v) => { clearTimeout(timer); resolve(v) }, (e: unknown) => { clearTimeout(timer); reject(e instanceof Error ? e : new Error(String(e))) })
  })
}
