// The Redis layout of one consumer, named once: the fields of its hash `rl:{id}` (one letter each: they are in
// every HMGET and HSET of the hot path) and the constants the grant script shares with this process. lua/grant.lua
// declares the same names (FIELD_ locals) and constants at its top (a script must stand alone);
// test/gateway/limiter/redis/layout.test.ts fails if the two differ. Layout: docs/limiter-internals.md.

/** The fields of `rl:{id}`; the minute ring's buckets are the fields '0'..'60', the day ring's past buckets live in `rl:{id}:d`. */
export const FIELD = {
  /** The minute ring's newest bucket, its units in the window, its oldest bucket with units. */
  minuteNewest: 't',
  minuteUnits: 'n',
  minuteOldest: 'o',
  /** The day ring's newest bucket, its units in the window, its oldest bucket with units, the newest bucket's units. */
  dayNewest: 'D',
  dayUnits: 'N',
  dayOldest: 'O',
  dayNewestUnits: 'c',
  /** The calendar month (year × 12 + month − 1) and its units. */
  month: 'Q',
  monthUnits: 'q',
  /**
   * The ban's end, the last ban's end, its escalation level; recent 429s 'ms:n,…' per bucket of the ban window, at its
   * start ('ms:ns': spared for reserves, pending; ban-record.ts).
   */
  banEnd: 'b',
  lastBanEnd: 'e',
  banLevel: 'l',
  recentRejections: 'k',
  /** Reserves 'holder,units,untilMs;…'. */
  reserves: 'r',
  /** Blocks held 'holder,minuteBucket,units;…' (granted in the last BLOCK_HELD_BUCKETS minute buckets, not given back yet). */
  blocks: 'p',
  /** When the hash expires (Unix ms). */
  expiry: 'x',
  /** Lapsed reserves charged to the day and month 'holder,units,dayBucket,month;…'. */
  lapsedReserves: 'L'
} as const

/**
 * Minute buckets (seconds) a block counts as held elsewhere, its own included, until its holder gives it back: the
 * holder's give-back is a timer at its bucket's end, late by as long as a loaded event loop holds it.
 */
export const BLOCK_HELD_BUCKETS = 3
/** How long Redis keeps a reserve after the call that set it. */
export const RESERVE_TTL_MS = 120_000
/**
 * No reserve grows unless the room would last this long at the consumer's pace: one racing to its limit would strand
 * it. calls.ts asks with this process's rate; grant.lua grows one only at the key's pace, every process's units in
 * its last RESERVE_PACE_BUCKETS minute buckets (a burst queued behind another process's stall meets a reserve less).
 */
export const RESERVE_SLACK_SECONDS = 10
/** Minute buckets (seconds) of the key's pace grant.lua measures before a reserve grows. */
export const RESERVE_PACE_BUCKETS = 3
/** A ban's escalation memory: a ban within this long of the last one's end is one level longer. */
export const ESCALATION_MS = 86_400_000
