// One contract suite, three stores: the in-process store, Redis standalone and a 3-master Redis
// Cluster must answer every case identically. Time is a virtual clock (the memory store's injected
// clock; the Redis script's test-only clock argument), so window edges are crossed without sleeping.
import { Cluster, Redis } from 'ioredis'
import t, { type Test } from 'tap'
import type { BanPolicy, Limits } from '../../../src/gateway/config/types.js'
import { DAY_WINDOW, MINUTE_WINDOW } from '../../../src/gateway/limiter/arithmetic.js'
import type { ConsumeResult, LimiterStore } from '../../../src/gateway/limiter/store.js'
import { createMemoryStore } from '../../../src/gateway/limiter/stores/memory.js'
import { createRedisStore } from '../../../src/gateway/limiter/stores/redis.js'
import { startRedis, startRedisCluster } from '../../helpers/redis.js'

const T0 = Date.UTC(2030, 0, 1) // a day-bucket boundary
const BAN: BanPolicy = { threshold: 3, windowSeconds: 60, durationSeconds: 10, maxDurationSeconds: 25 }
const NO_BAN = null

interface Harness {
  store: LimiterStore
  clock: { now: number }
}

type Factory = (t: Test) => Promise<Harness>

const factories: Record<string, Factory> = {
  memory: async () => {
    const clock = { now: T0 }
    return { store: createMemoryStore({ now: () => clock.now }), clock }
  },
  redis: async (t) => {
    const redis = await startRedis(t)
    const clock = { now: T0 }
    const store = createRedisStore(new Redis(redis.url, { enableOfflineQueue: true }), { clock: () => clock.now })
    t.teardown(() => store.close())
    return { store, clock }
  },
  cluster: async (t) => {
    const cluster = await startRedisCluster(t)
    const clock = { now: T0 }
    const client = new Cluster(cluster.nodes.map((n) => ({ host: '127.0.0.1', port: Number(n.split(':')[1]) })))
    await new Promise((resolve) => client.once('ready', resolve))
    const store = createRedisStore(client, { clock: () => clock.now })
    t.teardown(() => store.close())
    return { store, clock }
  }
}

async function consumeN (store: LimiterStore, id: string, limits: Limits, n: number, ban: BanPolicy | null = NO_BAN): Promise<ConsumeResult[]> {
  const results: ConsumeResult[] = []
  for (let i = 0; i < n; i++) results.push(await store.consume(id, limits, ban))
  return results
}

for (const [kind, factory] of Object.entries(factories)) {
  t.test(`${kind} store`, async (t) => {
    const { store, clock } = await factory(t)
    t.equal(store.kind, kind)
    let n = 0
    const fresh = (): string => `${kind}-key-${++n}`

    t.test('counts each admitted request once and reports the window state', async (t) => {
      clock.now = T0 + 500
      const id = fresh()
      const limits = { perMinute: 5, perDay: 100 }
      const results = await consumeN(store, id, limits, 7)
      t.same(results.map((r) => r.outcome), ['ok', 'ok', 'ok', 'ok', 'ok', 'rate_limited', 'rate_limited'])
      t.same(results.map((r) => r.minute.count), [1, 2, 3, 4, 5, 5, 5], 'rejected requests do not consume quota')
      t.same(results.map((r) => r.day.count), [1, 2, 3, 4, 5, 5, 5])
      const first = results[0]!
      t.equal(first.now, T0 + 500)
      t.equal(first.minute.resetAt, T0 + 61_000, 'the bucket of the first request leaves the window 61 s after its start')
      t.equal(first.minute.retryAt, 0)
      t.equal(first.day.resetAt, T0 + 97 * DAY_WINDOW.bucketMs)
      const rejected = results[5]!
      t.equal(rejected.minute.retryAt, T0 + 61_000, 'retry when the full bucket leaves the window')
      t.equal(rejected.day.retryAt, 0)
      const peeked = await store.peek(id, limits)
      t.equal(peeked.outcome, 'rate_limited')
      t.equal(peeked.minute.count, 5)
      t.same((await store.peek(fresh(), limits)).minute, { count: 0, resetAt: T0 + 500 + 60_000, retryAt: 0 }, 'an empty window resets now + 60 s')
    })

    t.test('a burst at the end of one minute and the start of the next is not admitted beyond the limit', async (t) => {
      const id = fresh()
      const limits = { perMinute: 5, perDay: 1000 }
      const base = T0 + 3_600_000
      clock.now = base + 59_900
      t.same((await consumeN(store, id, limits, 5)).map((r) => r.outcome), ['ok', 'ok', 'ok', 'ok', 'ok'])
      clock.now = base + 60_100
      t.equal((await store.consume(id, limits, NO_BAN)).outcome, 'rate_limited', 'a fixed window would admit here')
      clock.now = base + 119_899
      t.equal((await store.consume(id, limits, NO_BAN)).outcome, 'rate_limited', '59.999 s after the burst: still inside its rolling minute')
      clock.now = base + 120_000
      t.equal((await store.consume(id, limits, NO_BAN)).outcome, 'ok', 'the burst\'s bucket has left the window')
    })

    t.test('never over-admits in any rolling minute under random traffic', async (t) => {
      const id = fresh()
      const limits = { perMinute: 20, perDay: 100_000 }
      let seed = 7
      const random = (): number => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648 }
      let now = T0 + 7_200_000
      const admitted: number[] = []
      const calls = kind === 'memory' ? 5000 : 1500
      for (let i = 0; i < calls; i++) {
        now += Math.floor(random() * 200)
        clock.now = now
        if ((await store.consume(id, limits, NO_BAN)).outcome === 'ok') admitted.push(now)
      }
      let worst = 0
      for (let i = 0, j = 0; i < admitted.length; i++) {
        while (admitted[j]! <= admitted[i]! - 60_000) j++
        worst = Math.max(worst, i - j + 1)
      }
      t.equal(worst, limits.perMinute, 'the fullest rolling minute holds exactly the limit')
      t.ok(admitted.length > 0)
    })

    t.test('the day window', async (t) => {
      const id = fresh()
      const limits = { perMinute: 1000, perDay: 10 }
      const base = T0 + 10 * 86_400_000
      for (let i = 0; i < 10; i++) {
        clock.now = base + i * 3_600_000
        t.equal((await store.consume(id, limits, NO_BAN)).outcome, 'ok')
      }
      clock.now = base + 23 * 3_600_000
      const rejected = await store.consume(id, limits, NO_BAN)
      t.equal(rejected.outcome, 'rate_limited')
      t.equal(rejected.day.count, 10)
      t.equal(rejected.day.retryAt, base + 97 * DAY_WINDOW.bucketMs, 'the first request\'s 15-min bucket leaves 24 h 15 min after its start')
      t.equal(rejected.minute.retryAt, 0)
      clock.now = base + 97 * DAY_WINDOW.bucketMs - 1
      t.equal((await store.consume(id, limits, NO_BAN)).outcome, 'rate_limited')
      clock.now = base + 97 * DAY_WINDOW.bucketMs
      const admitted = await store.consume(id, limits, NO_BAN)
      t.equal(admitted.outcome, 'ok')
      t.equal(admitted.day.count, 10)
    })

    t.test('bans: threshold, no counting while banned, escalation, cap, list and lift', async (t) => {
      const id = fresh()
      const limits = { perMinute: 1, perDay: 1000 }
      let now = T0 + 20 * 86_400_000
      clock.now = now
      t.equal((await store.consume(id, limits, BAN)).outcome, 'ok')
      const flood = await consumeN(store, id, limits, 4, BAN)
      t.same(flood.map((r) => r.outcome), ['rate_limited', 'rate_limited', 'rate_limited', 'ban_started'], 'the 429 that crosses the threshold starts the ban')
      t.equal(flood[3]!.bannedUntil, now + 10_000)
      clock.now = now + 9_999
      const during = await store.consume(id, limits, BAN)
      t.equal(during.outcome, 'key_banned')
      t.equal(during.bannedUntil, now + 10_000, 'requests during a ban do not extend it')
      t.same((await store.listBans()).filter((b) => b.id === id), [{ id, until: now + 10_000 }])
      const peeked = await store.peek(id, limits)
      t.equal(peeked.outcome, 'key_banned')
      t.equal(peeked.bannedUntil, now + 10_000)
      t.equal(peeked.minute.count, 1, 'peek still reads a banned key\'s windows (ops usage view)')
      t.equal(peeked.day.count, 1)

      now += 10_000
      clock.now = now
      t.same((await consumeN(store, id, limits, 4, BAN)).map((r) => r.outcome),
        ['rate_limited', 'rate_limited', 'rate_limited', 'ban_started'], 'requests during the ban were not counted as 429s')
      t.equal((await store.peek(id, limits)).bannedUntil, now + 20_000, 'the second ban within 24 h doubles')
      now += 20_000
      clock.now = now
      t.equal((await consumeN(store, id, limits, 4, BAN))[3]!.bannedUntil, now + 25_000, 'capped at the maximum')

      t.equal(await store.liftBan(id), true)
      t.equal(await store.liftBan(id), false)
      t.same((await store.listBans()).filter((b) => b.id === id), [])
      t.equal((await store.consume(id, limits, BAN)).outcome, 'rate_limited', 'lifted: limited again, not banned')

      const later = fresh()
      now += 100_000
      clock.now = now
      await consumeN(store, later, limits, 5, BAN)
      now += 10_000 + 86_400_000
      clock.now = now
      t.equal((await consumeN(store, later, limits, 5, BAN))[4]!.bannedUntil, now + 10_000, 'a ban more than 24 h after the last one starts at the base duration again')
    })

    t.test('429s spread wider than the ban window do not ban; anonymous ids are never banned', async (t) => {
      const id = fresh()
      const limits = { perMinute: 1, perDay: 1000 }
      const base = T0 + 40 * 86_400_000
      clock.now = base
      await store.consume(id, limits, BAN)
      const outcomes: string[] = []
      for (let i = 0; i < 6; i++) {
        clock.now = base + i * 20_000
        outcomes.push((await store.consume(id, limits, BAN)).outcome)
      }
      t.same(outcomes, ['rate_limited', 'rate_limited', 'rate_limited', 'rate_limited', 'ok', 'rate_limited'],
        'four 429s 60 s apart from first to last: not more than 3 within 60 s')
      const anon = `ip:${fresh()}`
      t.same((await consumeN(store, anon, limits, 10, NO_BAN)).filter((r) => r.outcome !== 'rate_limited' && r.outcome !== 'ok'), [])
    })
  })
}

t.test('keys of one id share a Cluster slot and expire when idle; memory stays under 2 KB per active key', async (t) => {
  const redis = await startRedis(t)
  const { redisKeys } = await import('../../../src/gateway/limiter/stores/redis.js')
  const clock = { now: T0 }
  const store = createRedisStore(new Redis(redis.url), { clock: () => clock.now })
  t.teardown(() => store.close())
  const limits = { perMinute: 100_000, perDay: 1_000_000 }
  for (let i = 0; i < DAY_WINDOW.slots - 1; i++) {
    clock.now = T0 + i * DAY_WINDOW.bucketMs
    await store.consume('busy-key', limits, BAN)
  }
  for (let i = 0; i < MINUTE_WINDOW.slots; i++) {
    clock.now = T0 + (DAY_WINDOW.slots - 1) * DAY_WINDOW.bucketMs + i * 1000
    for (let k = 0; k < 3; k++) await store.consume('busy-key', limits, BAN)
  }
  const [m, d, ban, , rej] = redisKeys('busy-key')
  const minuteFields = Number(await redis.cli('HLEN', m))
  const dayFields = Number(await redis.cli('HLEN', d))
  t.ok(minuteFields <= MINUTE_WINDOW.slots + 3 && dayFields <= DAY_WINDOW.slots + 3, `fields bounded by the bucket count plus t, n, o (${minuteFields}, ${dayFields})`)
  t.equal(await redis.cli('OBJECT', 'ENCODING', d), 'listpack', 'the day ring stays compact')
  const bytes = Number(await redis.cli('MEMORY', 'USAGE', m, 'SAMPLES', '0')) + Number(await redis.cli('MEMORY', 'USAGE', d, 'SAMPLES', '0'))
  t.ok(bytes <= 2048, `MEMORY USAGE of an active key: ${bytes} bytes`)
  t.comment(`MEMORY USAGE per active key (minute + day rings): ${bytes} bytes`)
  const minuteTtl = Number(await redis.cli('PTTL', m))
  t.ok(minuteTtl > 0 && minuteTtl <= 61_000, 'minute ring expires 61 s after the last write')
  const dayTtl = Number(await redis.cli('PTTL', d))
  t.ok(dayTtl > 0 && dayTtl <= 97 * DAY_WINDOW.bucketMs, 'day ring expires after its window')
  t.equal(await redis.cli('EXISTS', ban, rej), '0', 'no ban state for a key that was never rejected')
  const slots = new Set(await Promise.all(redisKeys('acme-prod').map((k) => redis.cli('CLUSTER', 'KEYSLOT', k))))
  t.equal(slots.size, 1, 'one hash tag, one slot')
})
