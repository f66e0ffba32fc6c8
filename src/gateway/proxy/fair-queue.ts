// The upstream gate's queue (upstream-gate.ts): waiters are served one lane at a time, in turn — a
// lane is a consumer, or a client address for requests without a key — and each lane in order. One
// consumer with a hundred requests waiting for a backend connection (a flood, pipelined or not) no
// longer makes another consumer's one request wait behind all of them: it waits for the next free
// connection (docs/decisions.md §7). The oldest waiter overall stays at hand for the budget's
// deadline: every waiter has the same budget, and a lane keeps its order, so the oldest waiter
// overall is the first of its lane. A waiter can leave before its turn (its client went away):
// it stops counting at once, and is skipped when its place comes up.

export interface Queued {
  /** Whose request it is; waiters without a lane share one. */
  readonly lane?: string
  enteredAt: number
}

/** First in, first out, on an array with a moving head (no shift per item), compacted as it goes. */
class Fifo<T> {
  #items: Array<T | undefined> = []
  #head = 0

  get size (): number { return this.#items.length - this.#head }

  push (item: T): void { this.#items.push(item) }

  peek (): T | undefined { return this.#items[this.#head] }

  shift (): T | undefined {
    if (this.#head >= this.#items.length) return undefined
    const item = this.#items[this.#head]
    this.#items[this.#head++] = undefined
    if (this.#head === this.#items.length) {
      this.#items = []
      this.#head = 0
    } else if (this.#head >= 1024 && this.#head * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#head)
      this.#head = 0
    }
    return item
  }
}

const NO_LANE = ''

/** One lane's waiters in order, some perhaps gone (skipped when met); `live`: those still waiting. */
interface Lane<T> {
  readonly items: Fifo<T>
  live: number
}

export class FairQueue<T extends Queued> {
  /** Every waiter in the order it came; those already taken in turn are skipped when met. */
  readonly #byEntry = new Fifo<T>()
  readonly #waiting = new Set<T>()
  readonly #lanes = new Map<string, Lane<T>>()
  /** Lanes with waiters, in the order they are served; `#turn` is the next one's index. */
  #ring: string[] = []
  #turn = 0

  get size (): number { return this.#waiting.size }

  push (item: T): void {
    const key = item.lane ?? NO_LANE
    let lane = this.#lanes.get(key)
    if (lane === undefined) {
      lane = { items: new Fifo<T>(), live: 0 }
      this.#lanes.set(key, lane)
      this.#ring.push(key)
    }
    lane.items.push(item)
    lane.live++
    this.#byEntry.push(item)
    this.#waiting.add(item)
  }

  /** The waiter that came first, still waiting. */
  oldest (): T | undefined {
    let item = this.#byEntry.peek()
    while (item !== undefined && !this.#waiting.has(item)) {
      this.#byEntry.shift()
      item = this.#byEntry.peek()
    }
    return item
  }

  /** Takes the waiter that came first (the first of its lane). */
  takeOldest (): T | undefined {
    const item = this.oldest()
    if (item === undefined) return undefined
    this.#byEntry.shift()
    const key = item.lane ?? NO_LANE
    const lane = this.#lanes.get(key)
    if (lane !== undefined) this.#takeFirst(key, lane, this.#ring.indexOf(key))
    return item
  }

  /** Takes the next waiter in turn: the first of the next lane. */
  takeNext (): T | undefined {
    if (this.#ring.length === 0) return undefined
    if (this.#turn >= this.#ring.length) this.#turn = 0
    const key = this.#ring[this.#turn] ?? NO_LANE
    const lane = this.#lanes.get(key)
    if (lane === undefined) {
      this.#dropLane(key, this.#turn)
      return undefined
    }
    const item = this.#takeFirst(key, lane, this.#turn)
    if (this.#lanes.has(key)) this.#turn++
    return item
  }

  /**
   * `item` stops waiting now (its client went away): it no longer counts in `size` or in a lane's
   * place, and is never taken. False if it was not waiting.
   */
  remove (item: T): boolean {
    if (!this.#waiting.delete(item)) return false
    const key = item.lane ?? NO_LANE
    const lane = this.#lanes.get(key)
    if (lane !== undefined && --lane.live === 0) this.#dropLane(key, this.#ring.indexOf(key))
    return true
  }

  /**
   * Where a new waiter of `lane` would be served, counting from 1: after one round of every lane
   * for each waiter its own lane already has, and never later than behind everyone.
   */
  position (lane: string | undefined): number {
    const own = this.#lanes.get(lane ?? NO_LANE)
    const lanes = this.#ring.length + (own === undefined ? 1 : 0)
    return Math.min(this.size + 1, ((own?.live ?? 0) + 1) * lanes)
  }

  /** Takes the first waiter of `lane` still waiting (skipping those removed); drops the lane once none is left. */
  #takeFirst (key: string, lane: Lane<T>, index: number): T | undefined {
    let item = lane.items.shift()
    while (item !== undefined && !this.#waiting.has(item)) item = lane.items.shift()
    if (item !== undefined) {
      this.#waiting.delete(item)
      lane.live--
    }
    if (lane.live === 0) this.#dropLane(key, index)
    return item
  }

  #dropLane (key: string, index: number): void {
    this.#lanes.delete(key)
    if (index < 0) return
    this.#ring.splice(index, 1)
    if (index < this.#turn) this.#turn--
  }
}
