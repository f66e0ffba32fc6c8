// Every key a grant call writes carries its expiry when the call ends: rl:{id} and its day ring rl:{id}:d expire
// together, at the hash's `x` (grant.lua's write step: the day window, a reserve's end, a ban's escalation memory, the
// month's end). A key left without one lives forever if its consumer never comes back — one hash per consumer leaked
// in a shared Redis, and counts that outlive their window. The day hash is the one at risk: a call that writes it
// (an adjustment into a past day bucket, or the day ring moving on) while the hash's expiry does not grow (a month
// quota or a ban already keeps it longer) set none on a day hash created by that write. On a real redis-server, the
// grant script called as the store calls it, for each kind of call; after every call every key of the test's
// consumers is checked.
import t, { type Test } from 'tap'
import { Redis } from 'ioredis'
import { calendarMonth, DAY_BUCKET_MS, MINUTE_BUCKET_MS } from '../../../../src/gateway/limiter/arithmetic.js'
import type { Adjustment, GrantEntry, GrantReply } from '../../../../src/gateway/limiter/redis/scripts.js'
import { grantOnce } from '../../../helpers/grant-call.js'
import { FIELD } from '../../../../src/gateway/limiter/redis/layout.js'
import { startRedis } from '../../../helpers/redis.js'

const PREFIX = 'rl:{expiry-'
/** Bans after more than one 429 a minute, for at least a week: the escalation memory outlasts the day window. */
const LONG_BAN = { threshold: 1, windowSeconds: 60, durationSeconds: 7 * 86_400, maxDurationSeconds: 7 * 86_400 }

const entry = (id: string, fields: Partial<GrantEntry> = {}): GrantEntry => ({
  key: `${PREFIX}${id}}`, minuteLimit: 1_000, dayLimit: 10_000, monthLimit: 0, monthSoft: false, requests: 1, cost: 1, extra: 0,
  reserve: 0, write: true, blocksBucket: -1, blocks: 0, ban: null, adjustments: [], ...fields
})

/** An admission (or give-back) at Redis time `at` as the store writes it back: its minute, day and month buckets. */
const at = (ms: number, delta: number, month = false): Adjustment => ({
  minute: Math.floor(ms / MINUTE_BUCKET_MS), day: Math.floor(ms / DAY_BUCKET_MS), month: month ? calendarMonth(ms).index : 0, delta
})

t.test('every key a grant call writes expires, at the hash\'s recorded expiry', async (t) => {
  const redis = await startRedis(t)
  const client = new Redis(redis.url)
  t.teardown(() => { client.disconnect() })

  /** One call of one entry, as the store sends it (grantArgs). */
  const call = async (holder: string, one: GrantEntry): Promise<{ now: number, reply: GrantReply }> => {
    return await grantOnce(client, holder, one)
  }

  /**
   * After `label`'s call: every key of consumer `id` (of every consumer of the test: '') has an expiry in the future,
   * and a consumer's day hash expires when its hash does, at the hash's `x`. Prints what it found.
   */
  const everyKeyExpires = async (t: Test, label: string, id: string): Promise<void> => {
    const keys = (await client.keys(id === '' ? `${PREFIX}*` : `${PREFIX}${id}}*`)).sort()
    const without: string[] = []
    const mismatched: string[] = []
    for (const key of keys) {
      const ttl = await client.pttl(key)
      if (ttl <= 0) without.push(`${key} (PTTL ${ttl})`)
      const hash = key.endsWith(':d') ? key.slice(0, -2) : key
      const recorded = Number(await client.hget(hash, FIELD.expiry))
      const expiresAt = Number(await client.call('PEXPIRETIME', key))
      if (expiresAt !== recorded) mismatched.push(`${key} expires at ${expiresAt}, its hash records ${recorded}`)
    }
    t.same(without, [], `${label}: all ${keys.length} keys have an expiry`)
    t.same(mismatched, [], `${label}: each expires at its hash's x`)
  }

  await t.test('first request', async (t) => {
    const first = await call('A', entry('first'))
    t.equal(first.reply.admitted, 1)
    t.equal(await client.exists(`${PREFIX}first}`), 1, 'the hash was written')
    await everyKeyExpires(t, 'first request', 'first')
  })

  await t.test('a block given back into the last second', async (t) => {
    const granted = await call('A', entry('giveback', { extra: 20 }))
    t.equal(granted.reply.extra, 20, 'a block of 20 granted')
    // Into the next second (Redis time), then the unspent 15 are given back into the second they were counted in.
    await new Promise((resolve) => setTimeout(resolve, MINUTE_BUCKET_MS - (granted.now % MINUTE_BUCKET_MS) + 20))
    const back = await call('A', entry('giveback', { adjustments: [at(granted.now, -15)] }))
    t.ok(Math.floor(back.now / MINUTE_BUCKET_MS) > Math.floor(granted.now / MINUTE_BUCKET_MS), 'given back a second later')
    t.equal(back.reply.minute.used, 1 + 20 - 15 + 1, 'the minute keeps what was spent')
    await everyKeyExpires(t, 'give-back into the last second', 'giveback')
  })

  await t.test('write-backs after an outage: from the reserve and from the outage allowance', async (t) => {
    for (const allowance of [false, true]) {
      const id = allowance ? 'writeback-a' : 'writeback'
      // 42/min, 8 requests and a reserve of 20 asked: the 34 units of room left last RESERVE_SLACK_SECONDS at the
      // key's pace (8 in its last seconds), so a reserve grows on the first call (17: half the room, two sharing); after
      // the write-back the room left (at most 19 with the reserve kept back) no longer does, so it cannot grow again,
      // and the reserve shows what the write-back took out of it.
      const held = await call('A', entry(id, { minuteLimit: 42, requests: 8, reserve: 20 }))
      t.ok(held.reply.reserve > 0, `a reserve is kept (${held.reply.reserve})`)
      // Admitted 5 s ago and 16 min ago (the last day bucket) while Redis did not answer, written back now.
      const adjustments = [at(held.now - 16 * 60_000, 2), at(held.now - 5_000, 3)].map((adjustment) => allowance ? { ...adjustment, allowance } : adjustment)
      const back = await call('A', entry(id, { minuteLimit: 42, requests: 0, reserve: 20, adjustments }))
      t.equal(back.reply.day.used, 8 + 2 + 3, `the day counts them (${allowance ? "'a'" : 'reserve'})`)
      // What the reserve paid for comes out of it; what the outage allowance admitted does not (grantArgs sends its 'a').
      t.equal(back.reply.reserve, allowance ? held.reply.reserve : held.reply.reserve - 5,
        `the reserve: ${held.reply.reserve} → ${back.reply.reserve} (${allowance ? 'allowance: kept' : 'spent 5'})`)
      t.equal(await client.exists(`${PREFIX}${id}}:d`), 1, 'the past day bucket went into the day hash')
      await everyKeyExpires(t, `write-back ${allowance ? "with kind 'a'" : 'from the reserve'}`, id)
    }
  })

  await t.test('a read-only call writes nothing, with adjustments or without', async (t) => {
    const id = 'read'
    const first = await call('A', entry(id))
    const before = await client.hgetall(`${PREFIX}${id}}`)
    const expiresAt = await client.call('PEXPIRETIME', `${PREFIX}${id}}`)
    await call('A', entry(id, { requests: 0, write: false }))
    await call('A', entry(id, { requests: 0, write: false, adjustments: [at(first.now - 16 * 60_000, 4), at(first.now, 1)] }))
    t.same(await client.hgetall(`${PREFIX}${id}}`), before, 'the hash is as it was')
    t.equal(await client.call('PEXPIRETIME', `${PREFIX}${id}}`), expiresAt, 'and its expiry')
    t.equal(await client.exists(`${PREFIX}${id}}:d`), 0, 'no day hash was made')
    await call('A', entry('read-new', { requests: 0, write: false }))
    t.equal(await client.exists(`${PREFIX}read-new}`), 0, 'a read of a new consumer makes no key')
    await everyKeyExpires(t, 'read-only calls', id)
  })

  await t.test('a banned key\'s give-back and write-back into a day bucket in the past', async (t) => {
    const id = 'banned'
    const ban = { minuteLimit: 1, ban: LONG_BAN }
    const first = await call('A', entry(id, ban))
    const refused = await call('A', entry(id, { ...ban, requests: 3 }))
    t.ok(refused.reply.bannedUntil > first.now + 86_400_000, 'banned for a week: the hash is kept past the day window')
    await everyKeyExpires(t, 'the ban', id)
    const lastDayBucket = first.now - 16 * 60_000
    const back = await call('B', entry(id, { ...ban, requests: 0, adjustments: [at(lastDayBucket, -1)] }))
    t.equal(back.reply.outcome, 'key_banned')
    await everyKeyExpires(t, 'a banned key\'s give-back into the last day bucket', id)
    const written = await call('B', entry(id, { ...ban, requests: 0, adjustments: [at(lastDayBucket, 2)] }))
    t.equal(written.reply.outcome, 'key_banned')
    t.equal(await client.exists(`${PREFIX}${id}}:d`), 1, 'the day hash was written')
    await everyKeyExpires(t, 'a banned key\'s write-back into the last day bucket', id)
  })

  await t.test('a month quota: a write-back into the last day bucket, and the day ring moving on', async (t) => {
    const id = 'month'
    const quota = { monthLimit: 100_000 }
    const first = await call('A', entry(id, quota))
    t.equal(first.reply.month.used, 1)
    await call('A', entry(id, { ...quota, requests: 0, adjustments: [at(first.now - 16 * 60_000, 2, true)] }))
    t.equal(await client.exists(`${PREFIX}${id}}:d`), 1, 'the day hash was written')
    await everyKeyExpires(t, 'a month quota\'s write-back into the last day bucket', id)

    // The day ring as the last call of the previous day bucket left it (its newest bucket that one): the next call
    // moves that bucket's units into the day hash. With a ban's week-long memory the hash's expiry does not grow.
    const moving = 'moving'
    const ban = { minuteLimit: 1, ban: LONG_BAN }
    const start = await call('A', entry(moving, ban))
    await call('A', entry(moving, { ...ban, requests: 3 }))
    const previous = String(Math.floor(start.now / DAY_BUCKET_MS) - 1)
    await client.hset(`${PREFIX}${moving}}`, FIELD.dayNewest, previous, FIELD.dayOldest, previous)
    t.equal(await client.exists(`${PREFIX}${moving}}:d`), 0, 'no day hash yet')
    // A write-back of this day bucket (the ring moves on; nothing written into the past bucket itself).
    await call('B', entry(moving, { ...ban, requests: 0, adjustments: [at(start.now, 1)] }))
    t.equal(await client.exists(`${PREFIX}${moving}}:d`), 1, 'the moved bucket went into the day hash')
    await everyKeyExpires(t, 'the day ring moving on under a ban\'s memory', moving)
  })

  await t.test('a day hash gone while its hash lives on, written again', async (t) => {
    const id = 'daygone'
    const first = await call('A', entry(id))
    await call('A', entry(id, { requests: 0, adjustments: [at(first.now - 16 * 60_000, 1)] }))
    await client.del(`${PREFIX}${id}}:d`)
    await call('A', entry(id, { requests: 0, adjustments: [at(first.now - 16 * 60_000, 1)] }))
    t.equal(await client.exists(`${PREFIX}${id}}:d`), 1, 'the day hash was made again')
    await everyKeyExpires(t, 'the day hash made again', id)
  })

  await t.test('Redis lost its data: the re-seed makes both keys', async (t) => {
    const id = 'reseed'
    const { now } = await call('A', entry('reseed-clock', { requests: 0 }))
    await call('A', entry(id, { requests: 0, adjustments: [at(now - 16 * 60_000, 3), at(now - 2_000, 4)] }))
    t.equal(await client.exists(`${PREFIX}${id}}`, `${PREFIX}${id}}:d`), 2, 'both keys were made')
    await everyKeyExpires(t, 'a re-seed', id)
  })

  await t.test('the first call refuses, counted toward a ban: a request larger than the limit', async (t) => {
    const refused = await call('A', entry('refused', { minuteLimit: 3, cost: 5, ban: { ...LONG_BAN, threshold: 10 } }))
    t.same([refused.reply.outcome, refused.reply.admitted], ['rate_limited', 0])
    t.match(await client.hget(`${PREFIX}refused}`, FIELD.recentRejections), /^\d+:1$/, 'the 429 was recorded')
    await everyKeyExpires(t, 'a first call that only records a refusal', 'refused')
  })

  await t.test('at the end, every key of every consumer', async (t) => {
    await everyKeyExpires(t, 'all calls', '')
  })
})
