// A bound on waiting for Redis where the history must not hang with it: a frozen Redis (SIGSTOP, a
// stalled network) answers nothing and closes nothing, and the history's connection has no call
// timeout of its own — a write must not be timed out and sent again (HINCRBY would count twice), but
// an admin read or a gateway closing must not wait for it forever.

/** Resolves true when `work` settles within `ms`, false when the time ran out first (`work` goes on). */
export async function settlesWithin (work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<false>((resolve) => { timer = setTimeout(() => { resolve(false) }, ms) })
  try {
    return await Promise.race([work.then(() => true, () => true), late])
  } finally {
    clearTimeout(timer)
  }
}

/** `work`'s value, or an error once `ms` have passed without it. */
export async function within<T> (work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => { reject(new Error(`${what}: no answer within ${ms} ms`)) }, ms) })
  try {
    return await Promise.race([work, late])
  } finally {
    clearTimeout(timer)
  }
}
