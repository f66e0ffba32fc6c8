// A refusal the grant script spares from the ban count because a reserve kept back room that could have paid for it
// (the window not full) is recorded pending, and counted once that room is spent: before, a burst whose other process
// spent its reserve on its own requests got more than `threshold` final 429s on a full window and no ban (the
// simulator's burst-ban seed 297379223736: 73 answered 429, none banned). While the reserve is still kept back, the
// pending refusals stay excused. On a real redis-server, the grant script called as the store calls it.
import t, { type Test } from 'tap'
import { Redis } from 'ioredis'
import type { GrantEntry, GrantReply } from '../../../../src/gateway/limiter/redis/scripts.js'
import { grantOnce } from '../../../helpers/grant-call.js'
import { FIELD } from '../../../../src/gateway/limiter/redis/layout.js'
import { startRedis } from '../../../helpers/redis.js'

const BAN = { threshold: 30, windowSeconds: 60, durationSeconds: 900, maxDurationSeconds: 86_400 }

const entry = (key: string, requests: number, reserve: number): GrantEntry => ({
  key, minuteLimit: 100, dayLimit: 10_000, monthLimit: 0, monthSoft: false, requests, cost: 1, extra: 0, reserve, write: true,
  blocksBucket: -1, blocks: 0, ban: BAN, adjustments: []
})

/** The recent-429 field's events summed by kind (they are kept per bucket of the ban window: calls in one bucket merge). */
function tally (record: string | null): { counted: number, pending: number } {
  const sum = { counted: 0, pending: 0 }
  for (const [, count, spared] of (record ?? '').matchAll(/\d+:(\d+)(s?)/g)) sum[spared === 's' ? 'pending' : 'counted'] += Number(count)
  return sum
}

/** Holder A keeps back a 20-unit reserve; B fills the rest of the minute (80 of 100), then 40 refused: 20 counted, 20 spared. */
async function setUp (call: (holder: string, e: GrantEntry) => Promise<GrantReply>, key: string, t: Test): Promise<void> {
  const first = await call('A', entry(key, 1, 20))
  t.equal(first.reserve, 20, 'A holds a 20-unit reserve')
  t.equal((await call('B', entry(key, 79, 0))).admitted, 79, 'B admitted to the room others leave: 80 of 100 counted')
  const refused = await call('B', entry(key, 40, 0))
  t.same([refused.admitted, refused.bannedAt, refused.bannedUntil], [0, 0, 0], '40 refused, no ban')
}

t.test('spared for a reserve its holder then spends: counted, and the next refusal starts the ban', async (t) => {
  const redis = await startRedis(t)
  const client = new Redis(redis.url)
  t.teardown(() => { client.disconnect() })
  const call = async (holder: string, e: GrantEntry): Promise<GrantReply> =>
    (await grantOnce(client, holder, e)).reply

  const spent = 'rl:{spared-spent}'
  await setUp(call, spent, t)
  const pending = await client.hget(spent, FIELD.recentRejections)
  t.match(pending, /^\d+:20,\d+:20s$/, `20 counted, 20 pending (${pending})`)
  // A races its limit now (asks for no reserve): its 20 units go to its own requests, 5 more are refused. The room the
  // 20 pending refusals were spared for is spent: 20 + 20 + 5 final 429s on a full window, past the threshold.
  const holder = await call('A', entry(spent, 25, 0))
  t.equal(holder.admitted, 20, 'A spends the 20 it kept back')
  t.equal(holder.bannedAt, 1, 'its first refusal starts the ban (the 20 pending now count: 40 before it)')
  t.ok(holder.bannedUntil > 0, 'the key is banned')
  t.equal(await client.hget(spent, FIELD.recentRejections), '', 'the count starts over')

  // The same, but B refuses 10 more while A still keeps its reserve back: the 20 pending stay excused (30 counted).
  const kept = 'rl:{spared-kept}'
  await setUp(call, kept, t)
  const more = await call('B', entry(kept, 10, 0))
  t.same([more.admitted, more.bannedAt, more.bannedUntil], [0, 0, 0], '10 more refused while the reserve is kept back: 30 counted, no ban')
  const record = await client.hget(kept, FIELD.recentRejections)
  t.same(tally(record), { counted: 30, pending: 20 }, `30 counted, the 20 still pending (${record})`)
  const once = await call('B', entry(kept, 1, 0))
  t.same([once.admitted, once.bannedAt], [0, 1], 'one more counted: 31, the ban starts')
})
