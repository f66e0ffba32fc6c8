// How a plan's shadow records are ranked, the same in Redis (shadow-script.ts, shadow-read.ts) and in
// process memory (memory-history.ts): each UTC hour keeps only its heaviest consumers
// (SHADOW_KEEP_PER_HOUR), dropping the lightest — the one with the fewest rejections, the smallest id
// among equals, as Redis's ZPOPMIN does — and a read sums each consumer's rejections over the hours
// it is in and lists the heaviest. Pure functions, so both stores answer alike.

export type Ranked = [consumerId: string, rejections: number]

/** Most rejections first; among equals, by consumer id (so every store and process lists one order). */
export function byRejections (a: Ranked, b: Ranked): number {
  return b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)
}

/** Each consumer's rejections summed over `hours` (consumer → rejections, per hour). */
export function sumHours (hours: Iterable<Iterable<readonly [string, number]>>): Map<string, number> {
  const summed = new Map<string, number>()
  for (const hour of hours) for (const [id, n] of hour) summed.set(id, (summed.get(id) ?? 0) + n)
  return summed
}

/** The `top` consumers of `summed` with the most rejections, most first. */
export function topOf (summed: ReadonlyMap<string, number>, top: number): Ranked[] {
  return [...summed].sort(byRejections).slice(0, Math.max(0, top))
}

/** The `count` lightest of `entries`, in the order Redis's ZPOPMIN would drop them (fewest first, then smallest id). */
export function lightest (entries: Iterable<Ranked>, count: number): Ranked[] {
  if (count <= 0) return []
  return [...entries].sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).slice(0, count)
}
