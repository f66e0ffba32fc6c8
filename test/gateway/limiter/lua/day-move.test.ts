// An adjustment into the day bucket that moves into the day hash in the same call (the first call of a new 15-minute
// bucket: a block of the last second before it given back, or an outage's admissions written back) is counted in that
// bucket. Before, the script wrote the adjusted bucket and then overwrote it with the units it held before (the move,
// written last): a give-back stayed counted in the day for 24 h, and a write-back was in the running total but not in
// its bucket, so the total kept it after the bucket left the window. On a real redis-server, the grant script called
// as the store calls it; the day ring as the last call of the previous bucket left it.
import t from 'tap'
import { Redis } from 'ioredis'
import { DAY_BUCKET_MS, MINUTE_BUCKET_MS } from '../../../../src/gateway/limiter/arithmetic.js'
import type { GrantEntry } from '../../../../src/gateway/limiter/redis/scripts.js'
import { grantOnce } from '../../../helpers/grant-call.js'
import { FIELD } from '../../../../src/gateway/limiter/redis/layout.js'
import { startRedis } from '../../../helpers/redis.js'

const DAY_SLOTS = 97
const DAY_SCALE = 2n ** 40n

t.test('an adjustment into the day bucket moving in the same call is counted in it', async (t) => {
  const redis = await startRedis(t)
  const client = new Redis(redis.url)
  t.teardown(() => { client.disconnect() })

  for (const delta of [-4, 3]) {
    const key = `rl:{day-move${delta}}`
    const call = async (one: GrantEntry): Promise<{ now: number, dayUsed: number }> => {
      const { now, reply } = await grantOnce(client, 'A', one)
      return { now, dayUsed: reply.day.used }
    }
    const base: GrantEntry = {
      key, minuteLimit: 1_000, dayLimit: 10_000, monthLimit: 0, monthSoft: false, requests: 10, cost: 1, extra: 0,
      reserve: 0, write: true, blocksBucket: -1, blocks: 0, ban: null, adjustments: []
    }
    const first = await call(base)
    t.equal(first.dayUsed, 10)
    // The 10 as if counted in the previous day bucket, its last second: the next call moves them into the day hash.
    const previous = Math.floor(first.now / DAY_BUCKET_MS) - 1
    await client.hset(key, FIELD.dayNewest, String(previous), FIELD.dayOldest, String(previous))
    const lastSecond = ((previous + 1) * DAY_BUCKET_MS) / MINUTE_BUCKET_MS - 1
    const adjusted = await call({ ...base, requests: 0, adjustments: [{ minute: lastSecond, day: previous, month: 0, delta }] })
    const field = await client.hget(`${key}:d`, String(previous % DAY_SLOTS))
    const inBucket = field === null ? 0 : Number(BigInt(field) % DAY_SCALE)
    const label = delta < 0 ? `a give-back of ${-delta}` : `a write-back of ${delta}`
    t.equal(adjusted.dayUsed, 10 + delta, `${label}: the day counts ${10 + delta}`)
    t.equal(inBucket, 10 + delta, `${label}: the moved bucket holds ${inBucket}, what the day's total counts of it`)
    t.equal(Number(await client.hget(key, FIELD.dayUnits)), 10 + delta, 'the running total is the same')
  }
})
