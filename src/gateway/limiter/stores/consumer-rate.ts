// How busy each consumer is in this process, which decides whether it gets leases (leases.ts):
// requests per consumer in the current and the previous local second, and the room (limit − count,
// the tighter window) each had at its last answer this second. Two seconds of maps at most; the
// maps move on when a request of a new second is recorded, never when they are only read.

export interface ConsumerRate {
  /** Records one request of `id` (a lease hit or a store call) and returns its rate: requests in this second or the last, whichever is more. */
  hit: (id: string) => number
  /** Remembers the room `id` had at a store answer now. */
  noteRoom: (id: string, room: number) => void
  /** The room at `id`'s last answer in this second, or undefined: none this second. */
  roomOf: (id: string) => number | undefined
}

/** `now`: Unix ms (the gateway clock). */
export function createConsumerRate (now: () => number): ConsumerRate {
  let second = Math.floor(now() / 1000)
  let current = new Map<string, number>()
  let previous = new Map<string, number>()
  let room = new Map<string, number>()

  function moveTo (s: number): void {
    if (s === second) return
    previous = s === second + 1 ? current : new Map()
    current = new Map()
    room = new Map()
    second = s
  }

  return {
    hit (id) {
      moveTo(Math.floor(now() / 1000))
      const n = (current.get(id) ?? 0) + 1
      current.set(id, n)
      return Math.max(n, previous.get(id) ?? 0)
    },
    noteRoom (id, left) {
      moveTo(Math.floor(now() / 1000))
      room.set(id, left)
    },
    roomOf: (id) => Math.floor(now() / 1000) === second ? room.get(id) : undefined
  }
}
