// A reserve that lapses (its holder did not renew it within RESERVE_TTL_MS: partitioned, stopped or
// crashed) is charged to the day and month in full when another process finds it — its holder may
// have spent it — and noted; when its holder calls again, the charge is taken back and the holder's
// write-backs count what it really spent. A holder that finds its own lapsed reserve first is not
// charged at all. Before this, a lapsed reserve cost the consumer its day and month in full even when
// not one unit of it was spent. On a real redis-server, the grant script called as the store calls it.
import t from 'tap'
import { Redis } from 'ioredis'
import { DAY_BUCKET_MS, MINUTE_BUCKET_MS } from '../../../../src/gateway/limiter/arithmetic.js'
import type { Adjustment, GrantEntry } from '../../../../src/gateway/limiter/redis/scripts.js'
import { grantOnce } from '../../../helpers/grant-call.js'
import { startRedis } from '../../../helpers/redis.js'
import { FIELD } from '../../../../src/gateway/limiter/redis/layout.js'

const entry = (key: string, requests: number, reserve: number, adjustments: Adjustment[] = []): GrantEntry => ({
  key, minuteLimit: 1_000, dayLimit: 10_000, monthLimit: 0, monthSoft: true, requests, cost: 1, extra: 0, reserve, write: true,
  blocksBucket: -1, blocks: 0, ban: null, adjustments
})

t.test('a lapsed reserve is charged to the day only until its holder calls again with what it spent', async (t) => {
  const redis = await startRedis(t)
  const client = new Redis(redis.url)
  t.teardown(() => { client.disconnect() })
  const call = async (holder: string, e: GrantEntry): Promise<{ now: number, reserve: number }> => {
    const { now, reply } = await grantOnce(client, holder, e)
    return { now, reserve: reply.reserve }
  }
  const day = async (key: string): Promise<number> => Number(await client.hget(key, FIELD.dayUnits))
  /** Makes `holder`'s reserve on `key` lapse: its end moved to the past. */
  const lapse = async (key: string): Promise<void> => {
    const reserves = await client.hget(key, FIELD.reserves) ?? ''
    await client.hset(key, FIELD.reserves, reserves.replace(/,(\d+)$/, ',1').replace(/,(\d+);/g, ',1;'))
  }
  const spent = (now: number, units: number): Adjustment => ({ minute: Math.floor(now / MINUTE_BUCKET_MS), day: Math.floor(now / DAY_BUCKET_MS), month: 0, delta: units })

  // Another process finds the lapse first: charged in full, then given back but for what was spent.
  const key = 'rl:{lapse-a}'
  const first = await call('A', entry(key, 1, 40))
  t.ok(first.reserve > 0, `holder A holds a reserve (${first.reserve})`)
  await lapse(key)
  const before = await day(key)
  await call('B', entry(key, 1, 0))
  const charged = await day(key)
  t.equal(charged, before + 1 + first.reserve, `B's call charges A's lapsed reserve to the day in full (${before} → ${charged})`)
  t.match(await client.hget(key, FIELD.lapsedReserves), new RegExp(`^A,${first.reserve},`), 'and notes it')
  const back = await call('A', entry(key, 0, 0, [spent(first.now, 3)]))
  t.equal(await day(key), before + 1 + 3, `A returns with 3 spent: the day keeps those 3, not the ${first.reserve} charged`)
  t.equal(await client.hget(key, FIELD.lapsedReserves), '', 'the note is gone')
  t.equal(back.reserve, 0)

  // The holder finds its own lapsed reserve first: never charged, its write-backs counted.
  const own = 'rl:{lapse-b}'
  const held = await call('A', entry(own, 1, 40))
  await lapse(own)
  const ownBefore = await day(own)
  await call('A', entry(own, 0, 0, [spent(held.now, 2)]))
  t.equal(await day(own), ownBefore + 2, `A's own lapsed reserve (${held.reserve}) is not charged; its 2 spent are`)
})
