// A reserve grows only while the room left would last RESERVE_SLACK_SECONDS at the key's pace: the units every
// process counted in the key's last RESERVE_PACE_BUCKETS minute buckets (grant.lua, where the reserve is sized). The
// caller asks by its own rate and its last view of the room; a burst of another process (or one queued behind its
// stalled loop, sent at once) refused while a reserve is kept back starts a ban, and the reserve goes to nobody
// (docs/limiter-internals.md, "A reserve started a moment before a stalled process's burst"). On a real redis-server,
// the grant script called as the store calls it, two holders on one key.
import t from 'tap'
import { Redis } from 'ioredis'
import { DAY_BUCKET_MS, MINUTE_BUCKET_MS } from '../../../../src/gateway/limiter/arithmetic.js'
import { RESERVE_PACE_BUCKETS, RESERVE_SLACK_SECONDS } from '../../../../src/gateway/limiter/redis/layout.js'
import type { Adjustment, GrantEntry } from '../../../../src/gateway/limiter/redis/scripts.js'
import { grantOnce } from '../../../helpers/grant-call.js'
import { startRedis } from '../../../helpers/redis.js'

const LIMIT = 300
const WANT = 30

const entry = (id: string, fields: Partial<GrantEntry> = {}): GrantEntry => ({
  key: `rl:{pace-${id}}`, minuteLimit: LIMIT, dayLimit: 100 * LIMIT, monthLimit: 0, monthSoft: false, requests: 1, cost: 1,
  extra: 0, reserve: 0, write: true, blocksBucket: -1, blocks: 0, ban: null, adjustments: [], ...fields
})

/** Units counted at Redis time `ms`, as a write-back carries them. */
const countedAt = (ms: number, delta: number): Adjustment => ({
  minute: Math.floor(ms / MINUTE_BUCKET_MS), day: Math.floor(ms / DAY_BUCKET_MS), month: 0, delta
})

t.test('a reserve grows only while the room outlasts the key\'s pace, every process\'s units counted', async (t) => {
  const redis = await startRedis(t)
  const client = new Redis(redis.url)
  t.teardown(() => { client.disconnect() })

  await t.test('the room outlasts the pace: the reserve asked is kept back', async (t) => {
    const first = await grantOnce(client, 'A', entry('calm', { requests: 10, reserve: WANT }))
    t.equal(first.reply.admitted, 10)
    // 290 units of room, 10 counted in the last seconds: 290 × 3 ≥ 10 × 10.
    t.equal(first.reply.reserve, WANT, `A keeps ${first.reply.reserve} (asked ${WANT})`)
  })

  await t.test('another process\'s units count toward the pace: no reserve for a key racing its limit', async (t) => {
    const burst = await grantOnce(client, 'B', entry('racing', { requests: 100 }))
    t.equal(burst.reply.admitted, 100, 'B admitted 100 at once')
    const asked = await grantOnce(client, 'A', entry('racing', { requests: 1, reserve: WANT }))
    t.equal(asked.reply.admitted, 1)
    // A's own rate is one request; the key's pace is 101 units, and 199 of room last under 10 s of it.
    const room = LIMIT - 101
    t.ok(room * RESERVE_PACE_BUCKETS < 101 * RESERVE_SLACK_SECONDS, `199 units do not last ${RESERVE_SLACK_SECONDS} s at 101 units in ${RESERVE_PACE_BUCKETS} s`)
    t.equal(asked.reply.reserve, 0, 'no reserve grows')
    t.equal(asked.reply.held, 0, 'nothing is kept back from the key')
  })

  await t.test('units older than the pace\'s buckets do not count', async (t) => {
    const now = (await grantOnce(client, 'B', entry('earlier', { requests: 0, write: false }))).now
    // B's 100 units counted RESERVE_PACE_BUCKETS + 2 seconds ago (a write-back of what it admitted then).
    const back = await grantOnce(client, 'B', entry('earlier', { requests: 0, adjustments: [countedAt(now - (RESERVE_PACE_BUCKETS + 2) * MINUTE_BUCKET_MS, 100)] }))
    t.equal(back.reply.minute.used, 100, 'the minute window holds them')
    const asked = await grantOnce(client, 'A', entry('earlier', { requests: 1, reserve: WANT }))
    t.equal(asked.reply.reserve, WANT, `with only A's request in the last ${RESERVE_PACE_BUCKETS} s, A keeps ${asked.reply.reserve}`)
  })

  await t.test('a reserve held is kept when the pace rises: it does not grow, it is not taken', async (t) => {
    const held = await grantOnce(client, 'A', entry('held', { requests: 10, reserve: WANT }))
    t.equal(held.reply.reserve, WANT)
    const burst = await grantOnce(client, 'B', entry('held', { requests: 200 }))
    t.equal(burst.reply.admitted, 200, 'B admitted 200: A\'s reserve kept back from its room')
    const again = await grantOnce(client, 'A', entry('held', { requests: 1, reserve: WANT }))
    t.equal(again.reply.reserve, WANT, 'A still keeps what it held')
    const more = await grantOnce(client, 'A', entry('held', { requests: 1, reserve: WANT + 20 }))
    t.equal(more.reply.reserve, WANT, `asked for ${WANT + 20}, it stays at ${WANT}: the pace forbids growth`)
  })
})
