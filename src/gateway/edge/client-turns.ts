// Work of one client spread over turns of the event loop: at most `perClientPerTurn` of one
// client's per turn, in arrival order, the rest in later turns. One client's burst — its pipelined
// requests on many connections, or many connections opened at once — then costs each turn a few of
// its items rather than all of them, and another client's request waits behind a few (issue 39
// row 6). A "turn" runs from one check phase (setImmediate) to the next: the poll phase in between
// is where connections are accepted and read.

export interface ClientTurns {
  /** Whether `client` may go now: none of its items waits and fewer than its share went this turn. Counted if so. */
  now: (client: object) => boolean
  /** Runs `proceed` in a later turn, after the client's earlier ones, within its share per turn. */
  later: (client: object, proceed: () => void) => void
}

export function clientTurns (perClientPerTurn: number): ClientTurns {
  const waiting = new Map<object, Array<() => void>>()
  /** Items of each client that went in the current turn. */
  const wentThisTurn = new Map<object, number>()
  let scheduled = false

  function schedule (): void {
    if (scheduled) return
    scheduled = true
    setImmediate(runTurn)
  }

  function runTurn (): void {
    scheduled = false
    wentThisTurn.clear()
    // A snapshot: what the items let in now queue (a connection's next request) waits for the next turn.
    const batches: Array<Array<() => void>> = []
    for (const [client, queue] of waiting) {
      const batch = queue.splice(0, perClientPerTurn)
      batches.push(batch)
      wentThisTurn.set(client, batch.length)
      if (queue.length === 0) waiting.delete(client)
    }
    // Another turn while anything waits, or to reset the counts of this one.
    if (waiting.size > 0 || wentThisTurn.size > 0) schedule()
    for (const batch of batches) for (const proceed of batch) proceed()
  }

  return {
    now (client) {
      if (waiting.has(client)) return false
      const went = wentThisTurn.get(client) ?? 0
      if (went >= perClientPerTurn) return false
      wentThisTurn.set(client, went + 1)
      schedule()
      return true
    },
    later (client, proceed) {
      let queue = waiting.get(client)
      if (queue === undefined) {
        queue = []
        waiting.set(client, queue)
      }
      queue.push(proceed)
      schedule()
    }
  }
}
