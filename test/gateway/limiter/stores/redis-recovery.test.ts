// The Redis side of recovery against a real redis-server, read back through the decide and peek
// scripts: a write-back lands in the buckets it names (an old bucket moves the window's reset, a
// future one is counted now, one out of the window only in the day), once per sequence number;
// re-seed floors take the highest of the processes', write-backs add on top, a ban comes back; the
// registry counts processes; the epoch marker survives a restart from a snapshot and not one
// without, and the process registry says so.
import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { createProcessRegistry } from '../../../../src/gateway/limiter/stores/process-registry.js'
import { createRedisRecovery } from '../../../../src/gateway/limiter/stores/redis-recovery.js'
import { createRedisStore } from '../../../../src/gateway/limiter/stores/redis.js'
import { until } from '../../../helpers/poll.js'
import { startRedis } from '../../../helpers/redis.js'

const LIMITS = { perMinute: 1_000, perDay: 100_000 }
const MB = 1_000
const DB = 900_000

async function redisNow (client: Redis): Promise<number> {
  const [s, us] = await client.time()
  return Number(s) * 1000 + Math.floor(Number(us) / 1000)
}

async function setup (t: Test): Promise<{ client: Redis, recovery: ReturnType<typeof createRedisRecovery>, store: ReturnType<typeof createRedisStore>, redis: Awaited<ReturnType<typeof startRedis>> }> {
  const redis = await startRedis(t)
  const client = new Redis(redis.url)
  const store = createRedisStore(client)
  t.teardown(() => store.close())
  return { client, recovery: createRedisRecovery(client), store, redis }
}

t.test('write-back: into the buckets it names, counted once per sequence number', async (t) => {
  const { client, recovery, store } = await setup(t)
  for (let i = 0; i < 3; i++) await store.consume('c', LIMITS, null)
  const now = await redisNow(client)
  const bucket = Math.floor(now / MB)
  const day = Math.floor(now / DB)
  await recovery.writeBack('c', 'p1', 1, [{ minute: bucket, day, count: 5 }])
  t.equal((await store.peek('c', LIMITS)).minute.count, 8)
  await recovery.writeBack('c', 'p1', 1, [{ minute: bucket, day, count: 5 }])
  t.equal((await store.peek('c', LIMITS)).minute.count, 8, 'a retry of batch 1 changes nothing')
  await recovery.writeBack('c', 'p2', 1, [{ minute: bucket - 30, day, count: 2 }])
  const older = await store.peek('c', LIMITS)
  t.equal(older.minute.count, 10, 'another process\'s batch 1 is its own')
  t.equal(older.minute.resetAt, (bucket - 30 + 61) * MB, 'an older bucket still in the window: the window frees when it leaves')
  await recovery.writeBack('c', 'p1', 2, [{ minute: -1, day, count: 4 }, { minute: bucket + 3, day: day + 1, count: 1 }])
  const later = await store.peek('c', LIMITS)
  t.equal(later.minute.count, 11, 'no minute bucket: the day only; a future bucket: counted in the current one')
  t.equal(later.day.count, 15)
  const decided = await store.consume('c', LIMITS, null)
  t.same([decided.minute.count, decided.day.count], [12, 16], 'decide reads what was written back')
  t.equal(await client.hget('rl:{c}:m', 'w:p1'), '2', 'the last batch of each process is kept beside the ring')
})

t.test('write-back to a consumer Redis never saw, and to a bucket that left the window', async (t) => {
  const { client, recovery, store } = await setup(t)
  const now = await redisNow(client)
  await recovery.writeBack('new', 'p1', 7, [{ minute: Math.floor(now / MB) - 70, day: Math.floor(now / DB), count: 3 }])
  const read = await store.peek('new', LIMITS)
  t.same([read.minute.count, read.day.count], [0, 3], 'out of the minute window: the day only')
  const ttl = Number(await client.pttl('rl:{new}:m'))
  t.ok(ttl > 0 && ttl <= 61_000, `the mark expires (${ttl} ms)`)
  t.ok(Number(await client.pttl('rl:{new}:d')) > 86_400_000, 'the day ring lives as long as its bucket is in the window')
})

t.test('re-seed: the highest floor of the processes, write-backs on top, the ban back', async (t) => {
  const { client, recovery, store } = await setup(t)
  const now = await redisNow(client)
  const floor = { minuteBucket: Math.floor(now / MB), dayBucket: Math.floor(now / DB), bannedUntil: 0 }
  await recovery.reseed('c', { ...floor, minute: 500, day: 5_000 })
  await recovery.reseed('c', { ...floor, minute: 520, day: 4_000 })
  await recovery.writeBack('c', 'p1', 1, [{ minute: floor.minuteBucket, day: floor.dayBucket, count: 30 }])
  await recovery.reseed('c', { ...floor, minute: 520, day: 5_000 })
  const read = await store.peek('c', LIMITS)
  t.same([read.minute.count, read.day.count], [550, 5_030], 'max of the floors, plus what was written back')
  await recovery.reseed('banned', { ...floor, minute: 1, day: 1, bannedUntil: now + 60_000 })
  const banned = await store.consume('banned', LIMITS, { threshold: 30, windowSeconds: 60, durationSeconds: 900, maxDurationSeconds: 86_400 })
  t.equal(banned.outcome, 'key_banned')
  t.equal(banned.bannedUntil, now + 60_000)
  t.equal(await client.hget('rl:{banned}:b', 'u'), String(now + 60_000))
})

t.test('registry: processes heard from within the horizon', async (t) => {
  const { recovery } = await setup(t)
  t.equal(await recovery.heartbeat('a', 10_000), 1)
  t.equal(await recovery.heartbeat('b', 10_000), 2)
  t.equal(await recovery.heartbeat('a', 10_000), 2, 'a heartbeat again is one process')
  t.equal(await recovery.heartbeat('a', 10_000, true), 1, 'a process that leaves is no longer counted')
  await new Promise((resolve) => setTimeout(resolve, 30))
  t.equal(await recovery.heartbeat('c', 20), 1, 'b is past a 20 ms horizon')
})

t.test('epoch: kept by a restart from a snapshot, lost by a restart without; the registry tells', async (t) => {
  const { redis, recovery, client } = await setup(t)
  const lost: string[] = []
  const registry = createProcessRegistry(recovery, { holder: 'me', heartbeatMs: 60_000, onLost: (shard) => lost.push(shard), bounded: async (call) => await call() })
  await registry.start()
  t.teardown(() => registry.close())
  t.equal(registry.processes(), 1)
  t.equal(await registry.verify(''), false, 'the same data set')
  await redis.cli('SAVE')
  await redis.stop()
  await redis.start()
  await until('reconnected', () => client.status === 'ready', 5_000)
  t.equal(await registry.verify(''), false, 'restarted from its snapshot: the marker is still there')
  await redis.cli('FLUSHALL')
  await redis.cli('SAVE')
  await redis.stop()
  await redis.start()
  await until('reconnected', () => client.status === 'ready', 5_000)
  t.equal(await registry.verify(''), true, 'restarted empty: lost')
  t.same(lost, [''])
  t.equal(await registry.verify(''), false, 'the new marker is adopted: told once')
})
