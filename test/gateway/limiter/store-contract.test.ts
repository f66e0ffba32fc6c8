// One contract suite for every store: the in-process store (virtual clock), Redis standalone and a
// 3-master Redis Cluster, each with leases off and on. Redis stores run on Redis TIME: the cases
// start at a bucket boundary by Redis's own clock and cross real 1 s boundaries with short waits;
// ban durations are seconds. Cases that need minutes or days of time travel run on the in-process
// store's injected clock at the end (the arithmetic is one: arithmetic.ts and its Lua twin).
import { Cluster, Redis } from 'ioredis'
import t, { type Test } from 'tap'
import type { BanPolicy, Limits } from '../../../src/gateway/config/types.js'
import { DAY_WINDOW, MINUTE_WINDOW } from '../../../src/gateway/limiter/arithmetic.js'
import type { ConsumeResult, LimiterStore } from '../../../src/gateway/limiter/store.js'
import { createLeasedStore } from '../../../src/gateway/limiter/stores/leases.js'
import { createMemoryStore } from '../../../src/gateway/limiter/stores/memory.js'
import { createRedisStore, redisKeys } from '../../../src/gateway/limiter/stores/redis.js'
import { startRedis, startRedisCluster } from '../../helpers/redis.js'
import { sleep } from '../../helpers/poll.js'

const T0 = Date.UTC(2030, 0, 1) // a day-bucket boundary
const BAN: BanPolicy = { threshold: 3, windowSeconds: 60, durationSeconds: 1, maxDurationSeconds: 3 }
const NO_BAN = null

interface Harness {
  store: LimiterStore
  /** The store's clock now (Redis TIME for Redis stores). */
  now: () => Promise<number>
  /** Lets the store's clock run `ms` on (a real wait for Redis). */
  pass: (ms: number) => Promise<void>
}

function redisHarness (store: LimiterStore, client: Redis | Cluster): Harness {
  const node = client instanceof Cluster ? client.nodes('master')[0]! : client
  return {
    store,
    now: async () => {
      const [s, us] = await node.time()
      return Number(s) * 1000 + Math.floor(Number(us) / 1000)
    },
    pass: sleep
  }
}

async function clusterClient (t: Test): Promise<Cluster> {
  const cluster = await startRedisCluster(t)
  const client = new Cluster(cluster.nodes.map((n) => ({ host: '127.0.0.1', port: Number(n.split(':')[1]) })))
  await new Promise((resolve) => client.once('ready', resolve))
  return client
}

type Factory = (t: Test) => Promise<Harness>
const factories: Record<string, Factory> = {
  memory: async () => {
    const clock = { now: T0 + 7_000 }
    return { store: createMemoryStore({ now: () => clock.now }), now: async () => clock.now, pass: async (ms) => { clock.now += ms } }
  },
  redis: async (t) => {
    const client = new Redis((await startRedis(t)).url)
    const store = createRedisStore(client)
    t.teardown(() => store.close())
    return redisHarness(store, client)
  },
  'redis, leases': async (t) => {
    const client = new Redis((await startRedis(t)).url)
    const store = createLeasedStore(createRedisStore(client), { minRate: 5 })
    t.teardown(() => store.close())
    return redisHarness(store, client)
  },
  cluster: async (t) => {
    const client = await clusterClient(t)
    const store = createRedisStore(client)
    t.teardown(() => store.close())
    return redisHarness(store, client)
  },
  'cluster, leases': async (t) => {
    const client = await clusterClient(t)
    const store = createLeasedStore(createRedisStore(client), { minRate: 5 })
    t.teardown(() => store.close())
    return redisHarness(store, client)
  }
}

async function consumeN (store: LimiterStore, id: string, limits: Limits, n: number, ban: BanPolicy | null = NO_BAN): Promise<ConsumeResult[]> {
  const results: ConsumeResult[] = []
  for (let i = 0; i < n; i++) results.push(await store.consume(id, limits, ban))
  return results
}

/** Waits until the store's clock is just past the start of a 1 s bucket: the next ~900 ms stay in it. */
async function bucketStart (h: Harness): Promise<number> {
  const now = await h.now()
  await h.pass(1000 - (now % 1000) + 20)
  return await h.now()
}

for (const [kind, factory] of Object.entries(factories)) {
  t.test(`${kind} store`, async (t) => {
    const h = await factory(t)
    const { store } = h
    t.equal(store.kind, kind.split(',')[0])
    t.same(store.describe().kind, kind.split(',')[0])
    let n = 0
    const fresh = (): string => `${kind.replace(/\W/g, '')}-key-${++n}`

    t.test('counts each admitted request once and reports the window state', async (t) => {
      const start = await bucketStart(h)
      const bucket = Math.floor(start / 1000)
      const id = fresh()
      const limits = { perMinute: 5, perDay: 100 }
      const results = await consumeN(store, id, limits, 7)
      t.same(results.map((r) => r.outcome), ['ok', 'ok', 'ok', 'ok', 'ok', 'rate_limited', 'rate_limited'])
      t.same(results.map((r) => r.minute.count), [1, 2, 3, 4, 5, 5, 5], 'rejected requests do not consume quota')
      t.same(results.map((r) => r.day.count), [1, 2, 3, 4, 5, 5, 5])
      const first = results[0]!
      t.ok(first.now >= start && first.now < (bucket + 1) * 1000, 'now is the store\'s clock')
      t.equal(first.minute.resetAt, (bucket + 61) * 1000, 'the bucket of the first request leaves the window 61 s after its start')
      t.equal(first.minute.retryAt, 0)
      t.equal(first.day.resetAt, (Math.floor(first.now / DAY_WINDOW.bucketMs) + 97) * DAY_WINDOW.bucketMs)
      const rejected = results[5]!
      t.equal(rejected.minute.retryAt, (bucket + 61) * 1000, 'retry when the full bucket leaves the window')
      t.equal(rejected.day.retryAt, 0)
      const peeked = await store.peek(id, limits)
      t.equal(peeked.outcome, 'rate_limited')
      t.equal(peeked.minute.count, 5)
      const empty = await store.peek(fresh(), limits)
      t.same(empty.minute, { count: 0, resetAt: empty.now + 60_000, retryAt: 0 }, 'an empty window resets now + 60 s')
    })

    t.test('a full window stays full across a real bucket boundary (a sliding, not a fixed, window)', async (t) => {
      const start = await bucketStart(h)
      const id = fresh()
      const limits = { perMinute: 5, perDay: 1000 }
      t.same((await consumeN(store, id, limits, 5)).map((r) => r.outcome), ['ok', 'ok', 'ok', 'ok', 'ok'])
      await bucketStart(h)
      const next = await store.consume(id, limits, NO_BAN)
      t.equal(next.outcome, 'rate_limited', 'the next bucket still sees the five')
      t.equal(next.minute.retryAt, (Math.floor(start / 1000) + 61) * 1000)
    })

    t.test('the day window', async (t) => {
      await bucketStart(h)
      const id = fresh()
      const limits = { perMinute: 1000, perDay: 10 }
      const ok = await consumeN(store, id, limits, 10)
      t.ok(ok.every((r) => r.outcome === 'ok'))
      const rejected = await store.consume(id, limits, NO_BAN)
      t.equal(rejected.outcome, 'rate_limited')
      t.equal(rejected.day.count, 10)
      t.equal(rejected.day.retryAt, (Math.floor(ok[0]!.now / DAY_WINDOW.bucketMs) + 97) * DAY_WINDOW.bucketMs, 'the first request\'s 15-min bucket leaves 24 h 15 min after its start')
      t.equal(rejected.minute.retryAt, 0)
    })

    t.test('never over-admits a burst, and admits up to the limit', async (t) => {
      const id = fresh()
      const limits = { perMinute: 40, perDay: 100_000 }
      const outcomes: string[] = []
      const started = await h.now()
      while (await h.now() - started < 2_300) {
        const batch = await Promise.all(Array.from({ length: 10 }, async () => await store.consume(id, limits, NO_BAN)))
        outcomes.push(...batch.map((r) => r.outcome))
        await h.pass(40)
      }
      t.equal(outcomes.filter((o) => o === 'ok').length, limits.perMinute, `exactly the limit admitted out of ${outcomes.length}`)
      t.equal((await store.peek(id, limits)).minute.count, limits.perMinute, 'and exactly that counted, leases handed back')
    })

    t.test('bans: threshold, no counting while banned, escalation, cap, list, lift and reset', async (t) => {
      await bucketStart(h)
      const id = fresh()
      const limits = { perMinute: 1, perDay: 1000 }
      t.equal((await store.consume(id, limits, BAN)).outcome, 'ok')
      const flood = await consumeN(store, id, limits, 4, BAN)
      t.same(flood.map((r) => r.outcome), ['rate_limited', 'rate_limited', 'rate_limited', 'ban_started'], 'the 429 that crosses the threshold starts the ban')
      const first = flood[3]!
      t.equal(first.bannedUntil, first.now + 1_000)
      const during = await store.consume(id, limits, BAN)
      t.equal(during.outcome, 'key_banned')
      t.equal(during.bannedUntil, first.bannedUntil, 'requests during a ban do not extend it')
      t.same((await store.listBans()).filter((b) => b.id === id), [{ id, until: first.bannedUntil }])
      const peeked = await store.peek(id, limits)
      t.equal(peeked.outcome, 'key_banned')
      t.equal(peeked.minute.count, 1, 'peek still reads a banned consumer\'s windows (ops usage view)')

      await h.pass(first.bannedUntil - await h.now() + 5)
      const second = await consumeN(store, id, limits, 4, BAN)
      t.same(second.map((r) => r.outcome), ['rate_limited', 'rate_limited', 'rate_limited', 'ban_started'], 'requests during the ban were not counted as 429s')
      t.equal(second[3]!.bannedUntil, second[3]!.now + 2_000, 'the second ban within 24 h doubles')
      await h.pass(second[3]!.bannedUntil - await h.now() + 5)
      const third = (await consumeN(store, id, limits, 4, BAN))[3]!
      t.equal(third.bannedUntil, third.now + 3_000, 'capped at the maximum')

      t.equal(await store.liftBan(id), true)
      t.equal(await store.liftBan(id), false)
      t.same((await store.listBans()).filter((b) => b.id === id), [])
      t.equal((await store.consume(id, limits, BAN)).outcome, 'rate_limited', 'lifted: limited again, not banned')

      await store.reset(id)
      t.equal((await store.consume(id, limits, BAN)).outcome, 'ok', 'reset: the windows are empty')
      const again = (await consumeN(store, id, limits, 4, BAN))[3]!
      t.equal(again.outcome, 'ban_started')
      t.equal(again.bannedUntil, again.now + 1_000, 'reset forgot the escalation: the base duration again')
      await store.reset(id)
      t.same((await store.listBans()).filter((b) => b.id === id), [], 'reset ends the ban')
      t.equal((await store.consume(id, limits, BAN)).outcome, 'ok')
    })

    t.test('429s spread wider than the ban window do not ban', async (t) => {
      const id = fresh()
      const limits = { perMinute: 1, perDay: 1000 }
      const wide: BanPolicy = { ...BAN, windowSeconds: 1 }
      await store.consume(id, limits, wide)
      const outcomes: string[] = []
      for (let i = 0; i < 6; i++) {
        outcomes.push((await store.consume(id, limits, wide)).outcome)
        await h.pass(400)
      }
      t.notOk(outcomes.includes('ban_started'), `four 429s never within 1 s: ${outcomes.join(' ')}`)
    })
  })
}

t.test('in-process store, virtual clock: minute and day edges', async (t) => {
  const clock = { now: T0 }
  const store = createMemoryStore({ now: () => clock.now })
  const limits = { perMinute: 5, perDay: 1000 }
  const base = T0 + 3_600_000
  clock.now = base + 59_900
  t.same((await consumeN(store, 'edge', limits, 5)).map((r) => r.outcome), ['ok', 'ok', 'ok', 'ok', 'ok'])
  clock.now = base + 60_100
  t.equal((await store.consume('edge', limits, NO_BAN)).outcome, 'rate_limited', 'a fixed window would admit here')
  clock.now = base + 119_899
  t.equal((await store.consume('edge', limits, NO_BAN)).outcome, 'rate_limited', '59.999 s after the burst: still inside its rolling minute')
  clock.now = base + 120_000
  t.equal((await store.consume('edge', limits, NO_BAN)).outcome, 'ok', 'the burst\'s bucket has left the window')

  const day = { perMinute: 1000, perDay: 10 }
  const dayBase = T0 + 10 * 86_400_000
  for (let i = 0; i < 10; i++) {
    clock.now = dayBase + i * 3_600_000
    await store.consume('day', day, NO_BAN)
  }
  clock.now = dayBase + 97 * DAY_WINDOW.bucketMs - 1
  t.equal((await store.consume('day', day, NO_BAN)).outcome, 'rate_limited')
  clock.now = dayBase + 97 * DAY_WINDOW.bucketMs
  t.equal((await store.consume('day', day, NO_BAN)).outcome, 'ok', 'the first hour\'s bucket left the day window')

  const later = 'later'
  clock.now = dayBase + 200 * 86_400_000
  await consumeN(store, later, { perMinute: 1, perDay: 1000 }, 5, BAN)
  clock.now += 1_000 + 86_400_000
  t.equal((await consumeN(store, later, { perMinute: 1, perDay: 1000 }, 5, BAN))[4]!.bannedUntil, clock.now + 1_000, 'a ban more than 24 h after the last one starts at the base duration again')
})

t.test('keys of one id share a Cluster slot and expire when idle; memory stays under 2 KB per active key', async (t) => {
  const redis = await startRedis(t)
  const store = createRedisStore(new Redis(redis.url))
  t.teardown(() => store.close())
  const limits = { perMinute: 100_000, perDay: 1_000_000 }
  const id = 'busy-key'
  const [m, d, ban] = redisKeys(id)
  // Fill every slot of both rings as if the consumer had been busy all day (stamped from Redis TIME).
  const [s] = await redis.cli('TIME').then((out) => out.split('\n').map(Number))
  const nowBucket = Math.floor(s! / 1)
  const dayNow = Math.floor(s! * 1000 / DAY_WINDOW.bucketMs)
  const dayFields: string[] = []
  for (let j = dayNow - DAY_WINDOW.slots + 2; j < dayNow; j++) dayFields.push(String(j % DAY_WINDOW.slots), '3')
  await redis.cli('HSET', d, ...dayFields, 't', String(dayNow - 1), 'n', String(3 * (DAY_WINDOW.slots - 2)), 'o', String(dayNow - DAY_WINDOW.slots + 2))
  const minuteFields: string[] = []
  for (let j = nowBucket - MINUTE_WINDOW.slots + 2; j < nowBucket; j++) minuteFields.push(String(j % MINUTE_WINDOW.slots), '3')
  await redis.cli('HSET', m, ...minuteFields, 't', String(nowBucket - 1), 'n', String(3 * (MINUTE_WINDOW.slots - 2)), 'o', String(nowBucket - MINUTE_WINDOW.slots + 2))
  const result = await store.consume(id, limits, BAN)
  t.equal(result.minute.count, 3 * (MINUTE_WINDOW.slots - 2) + 1, 'the seeded ring is read as written')
  const minuteFieldCount = Number(await redis.cli('HLEN', m))
  const dayFieldCount = Number(await redis.cli('HLEN', d))
  t.ok(minuteFieldCount <= MINUTE_WINDOW.slots + 3 && dayFieldCount <= DAY_WINDOW.slots + 3, `fields bounded by the bucket count plus t, n, o (${minuteFieldCount}, ${dayFieldCount})`)
  t.equal(await redis.cli('OBJECT', 'ENCODING', d), 'listpack', 'the day ring stays compact')
  t.equal(await redis.cli('OBJECT', 'ENCODING', m), 'listpack', 'the minute ring stays compact')
  const bytes = Number(await redis.cli('MEMORY', 'USAGE', m, 'SAMPLES', '0')) + Number(await redis.cli('MEMORY', 'USAGE', d, 'SAMPLES', '0'))
  t.ok(bytes <= 2048, `MEMORY USAGE of an active key: ${bytes} bytes`)
  t.comment(`MEMORY USAGE per active key (minute + day rings): ${bytes} bytes`)
  const minuteTtl = Number(await redis.cli('PTTL', m))
  t.ok(minuteTtl > 0 && minuteTtl <= 61_000, `minute ring expires 61 s after its newest bucket (${minuteTtl})`)
  const dayTtl = Number(await redis.cli('PTTL', d))
  t.ok(dayTtl > 0 && dayTtl <= 97 * DAY_WINDOW.bucketMs, 'day ring expires after its window')
  t.equal(await redis.cli('EXISTS', ban), '0', 'no ban state for a consumer that was never rejected')
  const slots = new Set(await Promise.all(redisKeys('acme-prod').map((k) => redis.cli('CLUSTER', 'KEYSLOT', k))))
  t.equal(slots.size, 1, 'one hash tag, one slot')
})
