// A store call with a time budget that cannot fire for a reply already received, nor for a reply
// queued behind others on a Redis that is answering: a false timeout would hand the decision to
// the fallback, i.e. over-admit. docs/limiter-internals.md gives the whole argument; the short of it
// is beside each step below.

/** How recently a shard (one Redis connection's worth of calls) last answered anything. */
export interface Progress {
  /** Clock ms of the shard's last reply; 0: none yet. */
  lastReplyAt: number
}

export interface Budget {
  /** Fails a call after this long without a reply from its shard. */
  readonly budgetMs: number
  /** Fails a call this long after it was written, whatever its shard is doing. */
  readonly capMs: number
  /** The shard's progress, updated by every reply; undefined: the budget alone decides. */
  readonly progress?: Progress | undefined
  /** Clock of the budget (ms, default Date.now). */
  readonly now?: (() => number) | undefined
}

export class StoreTimeoutError extends Error {
  constructor (ms: number) {
    super(`limiter store did not answer within ${ms} ms`)
    this.name = 'StoreTimeoutError'
  }
}

export function asError (err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err))
}

/** `call()`, rejected with StoreTimeoutError once its budget is spent; a call that throws rejects. */
export function boundedCall<T> (call: () => Promise<T>, { budgetMs, capMs, progress, now = Date.now }: Budget): Promise<T> {
  let started = now()
  return new Promise<T>((resolve, reject) => {
    let done = false
    let timer: NodeJS.Timeout | undefined
    const verdict = (): void => {
      if (done) return
      // Budget without progress: while the shard keeps answering (our call is queued behind others),
      // wait until it has been quiet for the whole budget, up to the cap.
      const t = now()
      const quietFor = t - (progress?.lastReplyAt ?? 0)
      const postpone = Math.min(budgetMs - quietFor, started + capMs - t)
      if (postpone > 0) {
        timer = setTimeout(arm, postpone)
        return
      }
      done = true
      reject(new StoreTimeoutError(budgetMs))
    }
    // Timers run before the poll phase reads sockets: the timer only arms the verdict, which
    // setImmediate runs in the check phase, after every reply already received has been read.
    const arm = (): void => { setImmediate(verdict) }
    let pending: Promise<T>
    try {
      pending = call()
    } catch (err) {
      pending = Promise.reject(asError(err))
    }
    // The budget starts at the write: the Redis store writes this turn's calls at process.nextTick
    // (stores/redis.ts), queued by call() above, so this nextTick runs after it.
    process.nextTick(() => {
      if (done) return
      started = now()
      timer = setTimeout(arm, budgetMs)
    })
    pending.then((value) => {
      if (progress !== undefined) progress.lastReplyAt = now()
      if (done) return
      done = true
      clearTimeout(timer)
      resolve(value)
    }, (err: unknown) => {
      if (done) return
      done = true
      clearTimeout(timer)
      reject(asError(err))
    })
  })
}
