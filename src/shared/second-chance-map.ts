// A bounded map whose hit costs one Map lookup and one boolean write. An exact LRU (lru-cache) moves
// the entry to the tail of its list on every hit — four index writes into tables as large as the
// bound, and, with a TTL, two clock reads — which every request paid twice
// (the key cache, the in-process limiter's states). Here a hit only marks its entry.
//
// Eviction order (second chance, the CLOCK algorithm over the Map's insertion order): when a new
// key arrives at the bound, the entries are examined from the oldest placed; one hit since it was
// placed is moved to the newest end with its mark cleared (its second chance), the first one not
// hit since it was placed is evicted. So an entry that was not hit since it was placed always goes
// before one that was, and among entries not hit the oldest placed goes first; an entry hit since it
// was placed is evicted only when every entry was (a full pass clears every mark, then the oldest
// placed goes). Each eviction examines at most size + 1 entries, O(1) of them on average.
interface Slot<Value> { value: Value, hit: boolean }

export class SecondChanceMap<Key, Value> {
  readonly #slots = new Map<Key, Slot<Value>>()
  readonly #max: number

  constructor (max: number) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`SecondChanceMap bound must be a positive integer, got ${max}`)
    this.#max = max
  }

  get size (): number { return this.#slots.size }

  /** The value, marking it hit (it survives the next eviction pass that reaches it). */
  get (key: Key): Value | undefined {
    const slot = this.#slots.get(key)
    if (slot === undefined) return undefined
    slot.hit = true
    return slot.value
  }

  /** Replaces the value of a key present (marked hit), or places a new one, evicting one entry at the bound. */
  set (key: Key, value: Value): void {
    const slot = this.#slots.get(key)
    if (slot !== undefined) {
      slot.value = value
      slot.hit = true
      return
    }
    if (this.#slots.size >= this.#max) this.#evictOne()
    this.#slots.set(key, { value, hit: false })
  }

  delete (key: Key): boolean { return this.#slots.delete(key) }

  clear (): void { this.#slots.clear() }

  /** Every entry, oldest placed first; no mark changes. */
  * entries (): IterableIterator<[Key, Value]> {
    for (const [key, slot] of this.#slots) yield [key, slot.value]
  }

  #evictOne (): void {
    for (const [key, slot] of this.#slots) {
      this.#slots.delete(key)
      if (!slot.hit) return
      slot.hit = false
      this.#slots.set(key, slot)
    }
  }
}
