// The ban's record of recent 429s (src/gateway/limiter/ban-record.ts), as the in-process store keeps it: one entry per
// bucket of the ban window however many 429s fall in it, a 429 counted until its bucket leaves the window, and the
// Redis script's bucket count the same as this module's. The simulator's `ban-record` family checks both stores against
// the rule on thousands of edge instants; these are the rule's cases one by one, on an injected clock.
import { readFileSync } from 'node:fs'
import t from 'tap'
import { BAN_RECORD_BUCKETS, banBucketMs, recordRejection } from '../../../src/gateway/limiter/ban-record.js'
import { createMemoryStore } from '../../../src/gateway/limiter/memory/store.js'
import type { Ask } from '../../../src/gateway/limiter/store.js'

const T0 = Date.UTC(2030, 5, 1, 12)

t.test('the Redis script keeps the same buckets to a window', async (t) => {
  const lua = readFileSync(new URL('../../../src/gateway/limiter/lua/grant.lua', import.meta.url), 'utf8')
  t.match(lua, new RegExp(`\\nlocal BAN_BUCKETS = ${BAN_RECORD_BUCKETS}\\n`))
  t.match(lua, /local bucket_ms = math\.ceil\(window \/ BAN_BUCKETS\)/, 'a bucket rounded up to whole ms, as banBucketMs')
  t.equal(banBucketMs(60_000), 1_000)
  t.equal(banBucketMs(1_000), 17, 'a 1 s window: 17 ms buckets')
})

t.test('429s of one bucket share an entry; buckets that left the window are dropped', async (t) => {
  const record: number[] = []
  const windowMs = 60_000
  t.equal(recordRejection(record, T0 + 100, windowMs), 1)
  t.equal(recordRejection(record, T0 + 999, windowMs), 2)
  t.same(record, [T0, 2], 'one entry for the bucket, at its start')
  t.equal(recordRejection(record, T0 + 1_000, windowMs), 3)
  t.same(record, [T0, 2, T0 + 1_000, 1], 'the next bucket, a new entry')
  t.equal(recordRejection(record, T0 + 59_999, windowMs), 4, 'the first bucket is still in the window')
  t.equal(recordRejection(record, T0 + 60_000, windowMs), 3, 'its start is one window old: it left')
  t.same(record, [T0 + 1_000, 1, T0 + 59_000, 1, T0 + 60_000, 1])
})

t.test('a flood at a threshold of 1,000,000 keeps at most one entry per bucket', async (t) => {
  const record: number[] = []
  const windowMs = 3_600_000
  let held = 0
  let longest = 0
  for (let index = 0; index < 200_000; index++) {
    held = recordRejection(record, T0 + Math.floor(index * 36), windowMs) // two hours of a 429 every 36 ms
    longest = Math.max(longest, record.length / 2)
  }
  t.ok(longest <= BAN_RECORD_BUCKETS, `at most ${BAN_RECORD_BUCKETS} entries (${longest})`)
  t.ok(held >= 100_000 - 60_000 / 36 && held <= 100_000, `the last hour's 429s, less at most one bucket's (${held})`)
})

t.test('the in-process store bans on the rule: counted for the window less at most one bucket', async (t) => {
  let now = T0
  const store = createMemoryStore({ now: () => now })
  const ask: Ask = { limits: { perMinute: 1, perDay: 1_000 }, ban: { threshold: 3, windowSeconds: 60, durationSeconds: 10, maxDurationSeconds: 40 }, cost: 1, monthLimit: 0, overage: false }
  const flood = async (id: string, at: number, count: number): Promise<string[]> => {
    now = at
    const outcomes: string[] = []
    for (let index = 0; index < count; index++) outcomes.push((await store.consume(id, ask)).outcome)
    return outcomes
  }
  for (const id of ['inside', 'edge']) {
    t.same(await flood(id, T0 + 900, 4), ['ok', 'rate_limited', 'rate_limited', 'rate_limited'], `${id}: three 429s in bucket T0`)
  }
  t.same(await flood('inside', T0 + 59_999, 1), ['ban_started'], 'their bucket still in the window: the fourth 429 bans')
  t.same(await flood('edge', T0 + 60_000, 1), ['rate_limited'],
    'at T0 + 60 s their bucket has left the window (an exact count would keep them until T0 + 60.9 s): no ban')
  t.same(await flood('edge', T0 + 60_001, 3), ['rate_limited', 'rate_limited', 'ban_started'], 'four 429s in the window again: banned')
})
