// Where a shard's clock is, seen from this process: Redis time at a local instant x lies in
// [x + lo, x + hi]. A reply carrying Redis time T narrows them (the script ran after the call was
// sent and before its reply was read: hi ≤ T − sent, lo ≥ T − received); they widen by DRIFT per ms
// since. A grant is spent only while x + hi is inside its minute bucket, and a reserve admission is
// written back in the bucket of x + hi: never earlier than the instant Redis would have seen.

/** How fast the two clocks may drift apart: 1 ms per second (1,000 ppm), far above real clocks. */
export const DRIFT = 0.001

export type ShardClock = ReturnType<typeof createShardClock>

export function createShardClock () {
  let hi = Infinity
  let hiAt = 0
  let lo = -Infinity
  let loAt = 0
  return {
    /** Learns from a reply: Redis time `redisNow`, call sent at local `sent`, read at local `received`. */
    learn (redisNow: number, sent: number, received: number): void {
      if (redisNow - sent <= hi + DRIFT * (received - hiAt)) {
        hi = redisNow - sent
        hiAt = received
      }
      if (redisNow - received >= lo - DRIFT * (received - loAt)) {
        lo = redisNow - received
        loAt = received
      }
    },
    /** Upper bound of Redis time at local `x`; undefined before the first reply. */
    latest: (localNow: number): number | undefined => hi === Infinity ? undefined : localNow + hi + DRIFT * Math.max(0, localNow - hiAt),
    /** Lower bound of Redis time at local `x`; undefined before the first reply. */
    earliest: (localNow: number): number | undefined => lo === -Infinity ? undefined : localNow + lo - DRIFT * Math.max(0, localNow - loAt)
  }
}
