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
    call.then((v) => { cancel(); resolve(v) }, (e: unknown) => { cancel(); reject(e instanceof Error ? e : new Error(String(e))) })
  })
}
