// The end of the current turn of the event loop, for the Redis path: the Redis store sends the
// decisions it queued and uncorks its sockets there, and the bounded calls of the turn start their
// budget there — in that order, in one setImmediate. A turn here is a phase of the loop, not one
// callback: every request read in one poll phase (each its own callback, each followed by its own
// process.nextTick) joins the same batch, and its check phase sends it. Both parts must use this one
// queue: a budget started by a separate callback could start before the write it bounds.

let queue: Array<() => void> | undefined

function run (): void {
  const due = queue ?? []
  queue = undefined
  for (const fn of due) fn()
}

/** Runs `fn` at the end of this turn (the check phase), after everything registered before it. */
export function atTurnEnd (fn: () => void): void {
  if (queue === undefined) {
    queue = []
    setImmediate(run)
  }
  queue.push(fn)
}
