// The repair of day hashes an older grant script left without an expiry, on a real redis-server and a real
// 3-master Cluster: a leaked day hash gets its limiter hash's expiry (x), one whose limiter hash is gone gets a
// day, and nothing else changes — hashes with an expiry, other keys, other types; a dry run changes nothing.
import t, { type Test } from 'tap'
import { Cluster, Redis } from 'ioredis'
import { sweepDayExpiry } from '../../../../src/gateway/limiter/redis/day-expiry-sweep.js'
import type { RedisClient } from '../../../../src/gateway/redis/connection.js'
import { dayKey, limiterKey } from '../../../../src/gateway/redis/keys.js'
import { startRedis, startRedisCluster } from '../../../helpers/redis.js'

const DAY_MS = 86_400_000
const CONSUMERS = 30

/** Kind of consumer `i`: a leaked day hash beside its limiter hash, a leaked one alone, one with an expiry. */
const kindOf = (i: number): 'paired' | 'orphaned' | 'kept' => (['paired', 'orphaned', 'kept'] as const)[i % 3]!

async function seed (client: RedisClient, now: number): Promise<void> {
  for (let i = 0; i < CONSUMERS; i++) {
    const id = `c${i}`
    await client.hset(dayKey(id), '5', '3')
    if (kindOf(i) === 'paired') await client.hset(limiterKey(id), 'n', '4', 'x', String(now + 3_600_000 + i))
    if (kindOf(i) === 'kept') await client.pexpire(dayKey(id), 5_000_000)
  }
  await client.set('rl:{decoy}:d', 'a string, not a day hash')
  await client.hset('rl:{c0}:u:203001', 'requests', '9')
}

async function check (t: Test, client: RedisClient, now: number): Promise<void> {
  for (let i = 0; i < CONSUMERS; i++) {
    const id = `c${i}`
    const expiresAt = await client.pexpiretime(dayKey(id))
    if (kindOf(i) === 'paired') t.equal(expiresAt, now + 3_600_000 + i, `${id}: its limiter hash's x`)
    if (kindOf(i) === 'orphaned') t.ok(expiresAt > now + DAY_MS - 60_000 && expiresAt <= Date.now() + DAY_MS + 1_000, `${id}: a day from the sweep (${expiresAt - now} ms)`)
    if (kindOf(i) === 'kept') t.ok(await client.pttl(dayKey(id)) <= 5_000_000, `${id}: its own expiry kept`)
    t.equal(await client.hget(dayKey(id), '5'), '3', `${id}: its buckets untouched`)
  }
  t.equal(await client.pttl('rl:{decoy}:d'), -1, 'a key of another type is not touched')
  t.equal(await client.pttl('rl:{c0}:u:203001'), -1, 'another key of the consumer is not touched')
}

async function sweepBoth (t: Test, client: RedisClient): Promise<void> {
  const now = Date.now()
  await seed(client, now)
  const dry = await sweepDayExpiry(client, { dryRun: true, pageSize: 4, pauseMs: 0 })
  t.same(dry, { dayHashes: CONSUMERS, paired: 10, orphaned: 10 }, 'a dry run counts every day hash and the leaked ones by kind')
  t.equal(await client.pttl(dayKey('c0')), -1, 'and changes nothing')
  const report = await sweepDayExpiry(client, { pageSize: 4, pauseMs: 1 })
  t.same(report, { dayHashes: CONSUMERS, paired: 10, orphaned: 10 }, 'the sweep fixes the 20 leaked ones, in pages of 4')
  await check(t, client, now)
  t.same(await sweepDayExpiry(client), { dayHashes: CONSUMERS, paired: 0, orphaned: 0 }, 'a second sweep finds nothing left')
}

t.test('a standalone Redis', async (t) => {
  const redis = await startRedis(t)
  const client = new Redis(redis.url)
  t.teardown(() => { client.disconnect() })
  await sweepBoth(t, client)
})

t.test('a Cluster: every master is scanned, each fix goes to its slot', async (t) => {
  const cluster = await startRedisCluster(t)
  const client = new Cluster(cluster.nodes.map((node) => { const [host, port] = node.split(':'); return { host: host!, port: Number(port) } }))
  t.teardown(() => { client.disconnect() })
  await sweepBoth(t, client)
  const perMaster = await Promise.all(cluster.ports.map(async (port) => Number(await cluster.cli(port, 'DBSIZE'))))
  t.ok(perMaster.filter((size) => size > 0).length >= 2, `the keys were spread over the masters (${perMaster.join(', ')} keys)`)
})
