// A consumer's recent 429s, as the ban counts them: per bucket of the ban window, not one entry per refusal. A record
// of single 429s grows with the flood it is meant to stop — at a threshold in the thousands every refusal of that key
// read and rewrote thousands of entries (2.5 ms of Redis a call after 3,000 refusals at 1,000,000 in an hour, 29 Nov)
// — while a record of BAN_RECORD_BUCKETS buckets has at most that many entries (the buckets that start inside one
// window) however hard the key is flooded. The price is the
// ban's edge: a 429 is kept at its bucket's start, so it counts toward the ban for at least the window less one bucket
// and at most the window, never longer — no ban an exact count would not start. The Redis script (lua/grant.lua,
// count_rejections) keeps the same buckets in its own text; test/gateway/limiter/ban-record.test.ts checks they agree.

/** Buckets to a ban window. */
export const BAN_RECORD_BUCKETS = 60

/** One bucket of a window of `windowMs`: whole milliseconds, so a window of 1 s has 17 ms buckets (59 of them whole). */
export function banBucketMs (windowMs: number): number {
  return Math.ceil(windowMs / BAN_RECORD_BUCKETS)
}

/**
 * Adds one 429 at `nowMs` to `record` (pairs `bucketStart, count`, oldest first; changed in place), drops the buckets that
 * have left the window, and returns the 429s the window holds now, this one included.
 */
export function recordRejection (record: number[], nowMs: number, windowMs: number): number {
  let expired = 0
  while (expired < record.length && record[expired]! <= nowMs - windowMs) expired += 2
  if (expired > 0) record.splice(0, expired)
  const bucketMs = banBucketMs(windowMs)
  const bucketStart = Math.floor(nowMs / bucketMs) * bucketMs
  if (record.length > 0 && record[record.length - 2] === bucketStart) record[record.length - 1]!++
  else record.push(bucketStart, 1)
  let held = 0
  for (let at = 1; at < record.length; at += 2) held += record[at]!
  return held
}
