// One contract suite for every store: the in-process store (virtual clock), and the Redis store as
// production builds it (create-store.ts: grants, reserves, batching, the shard state machine) on a
// standalone Redis and on a 3-master Cluster. Redis stores run on Redis TIME: the cases start at a
// bucket boundary by Redis's own clock and cross real 1 s boundaries with short waits; ban durations
// are seconds. Cases that need minutes or days of time travel run on the in-process store's injected
// clock, and in the simulator (test/gateway/limiter/simulation/) on the Redis path's own code.
import { Cluster, Redis } from 'ioredis'
import t, { type Test } from 'tap'
import type { BanPolicy, Limits } from '../../../src/gateway/config/types.js'
import { DAY_WINDOW } from '../../../src/gateway/limiter/arithmetic.js'
import { createStore } from '../../../src/gateway/limiter/create-store.js'
import { createMemoryStore } from '../../../src/gateway/limiter/memory/store.js'
import { askOf, type Ask, type ConsumeResult, type LimiterStore } from '../../../src/gateway/limiter/store.js'
import { dayKey, limiterKey } from '../../../src/gateway/redis/keys.js'
import { startRedis, startRedisCluster } from '../../helpers/redis.js'
import { sleep } from '../../helpers/poll.js'
import { FIELD } from '../../../src/gateway/limiter/redis/layout.js'

// The stores' cases wait on real 1 s boundaries and ban lengths (Redis TIME), not on the CPU: the
// three stores and the two cases after them run side by side, each on its own Redis.
t.jobs = 3

const T0 = Date.UTC(2030, 0, 1) // a day-bucket boundary
const BAN: BanPolicy = { threshold: 3, windowSeconds: 60, durationSeconds: 1, maxDurationSeconds: 3 }

interface Harness {
  store: LimiterStore
  /** The store's clock now (Redis TIME for Redis stores). */
  now: () => Promise<number>
  /** Lets the store's clock run `ms` on (a real wait for Redis). */
  pass: (ms: number) => Promise<void>
}

const ask = (limits: Limits, ban: BanPolicy | null = null, cost = 1): Ask => askOf(limits, ban, cost)

function redisHarness (store: LimiterStore, time: () => Promise<Array<string | number>>): Harness {
  return {
    store,
    now: async () => {
      const [s, us] = await time()
      return Number(s) * 1000 + Math.floor(Number(us) / 1000)
    },
    pass: sleep
  }
}

type Factory = (t: Test) => Promise<Harness>
const factories: Record<string, Factory> = {
  memory: async () => {
    const clock = { now: T0 + 7_000 }
    return { store: createMemoryStore({ now: () => clock.now }), now: async () => clock.now, pass: async (ms) => { clock.now += ms } }
  },
  redis: async (t) => {
    const redis = await startRedis(t)
    const store = await createStore({ redisUrl: redis.url })
    t.teardown(() => store.close())
    const client = new Redis(redis.url)
    t.teardown(() => client.disconnect())
    return redisHarness(store, async () => await client.time())
  },
  cluster: async (t) => {
    const cluster = await startRedisCluster(t)
    const store = await createStore({ redisClusterNodes: cluster.nodes }, { readyWaitMs: 5_000 })
    t.teardown(() => store.close())
    const client = new Cluster(cluster.nodes.map((n) => ({ host: '127.0.0.1', port: Number(n.split(':')[1]) })))
    await new Promise((resolve) => client.once('ready', resolve))
    t.teardown(() => client.disconnect())
    return redisHarness(store, async () => await client.nodes('master')[0]!.time())
  }
}

async function consumeN (store: LimiterStore, id: string, limits: Limits, n: number, ban: BanPolicy | null = null, cost = 1): Promise<ConsumeResult[]> {
  const results: ConsumeResult[] = []
  for (let i = 0; i < n; i++) results.push(await store.consume(id, ask(limits, ban, cost)))
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
    t.equal(store.describe().kind, kind)
    let n = 0
    const fresh = (): string => `${kind}-key-${++n}`

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
      const peeked = await store.peek(id, ask(limits))
      t.equal(peeked.outcome, 'rate_limited')
      t.equal(peeked.minute.count, 5)
      const empty = await store.peek(fresh(), ask(limits))
      t.same(empty.minute, { count: 0, resetAt: empty.now + 60_000, retryAt: 0 }, 'an empty window resets now + 60 s')
    })

    t.test('a request costing more spends that many units of every window, never part of them', async (t) => {
      await bucketStart(h)
      const id = fresh()
      const limits = { perMinute: 10, perDay: 100 }
      const results = await consumeN(store, id, limits, 3, null, 5)
      t.same(results.map((r) => r.outcome), ['ok', 'ok', 'rate_limited'], 'two of cost 5 fill 10; the third has no room')
      t.same(results.map((r) => r.minute.count), [5, 10, 10])
      t.equal((await store.consume(id, ask(limits))).outcome, 'rate_limited', 'nothing left for one unit either')
    })

    t.test('a full window stays full across a real bucket boundary (a sliding, not a fixed, window)', async (t) => {
      const start = await bucketStart(h)
      const id = fresh()
      const limits = { perMinute: 5, perDay: 1000 }
      t.same((await consumeN(store, id, limits, 5)).map((r) => r.outcome), ['ok', 'ok', 'ok', 'ok', 'ok'])
      await bucketStart(h)
      const next = await store.consume(id, ask(limits))
      t.equal(next.outcome, 'rate_limited', 'the next bucket still sees the five')
      t.equal(next.minute.retryAt, (Math.floor(start / 1000) + 61) * 1000)
    })

    t.test('the day window', async (t) => {
      await bucketStart(h)
      const id = fresh()
      const limits = { perMinute: 1000, perDay: 10 }
      const ok = await consumeN(store, id, limits, 10)
      t.ok(ok.every((r) => r.outcome === 'ok'))
      const rejected = await store.consume(id, ask(limits))
      t.equal(rejected.outcome, 'rate_limited')
      t.equal(rejected.day.count, 10)
      t.equal(rejected.day.retryAt, (Math.floor(ok[0]!.now / DAY_WINDOW.bucketMs) + 97) * DAY_WINDOW.bucketMs, 'the first request\'s 15-min bucket leaves 24 h 15 min after its start')
      t.equal(rejected.minute.retryAt, 0)
    })

    t.test('never over-admits a burst, admits up to the limit, and holds nothing back once quiet', async (t) => {
      const id = fresh()
      const limits = { perMinute: 40, perDay: 100_000 }
      const outcomes: string[] = []
      const started = await h.now()
      while (await h.now() - started < 2_300) {
        const batch = await Promise.all(Array.from({ length: 10 }, async () => await store.consume(id, ask(limits))))
        outcomes.push(...batch.map((r) => r.outcome))
        await h.pass(40)
      }
      t.equal(outcomes.filter((o) => o === 'ok').length, limits.perMinute, `exactly the limit admitted out of ${outcomes.length}`)
      await h.pass(3_500) // idle: unspent grants are given back, reserves handed back
      t.equal((await store.peek(id, ask(limits))).minute.count, limits.perMinute, 'and exactly that counted')
    })

    t.test('bans: threshold, no counting while banned, escalation, cap, list, lift and reset', async (t) => {
      await bucketStart(h)
      const id = fresh()
      const limits = { perMinute: 1, perDay: 1000 }
      t.equal((await store.consume(id, ask(limits, BAN))).outcome, 'ok')
      const flood = await consumeN(store, id, limits, 4, BAN)
      t.same(flood.map((r) => r.outcome), ['rate_limited', 'rate_limited', 'rate_limited', 'ban_started'], 'the 429 that crosses the threshold starts the ban')
      const first = flood[3]!
      t.equal(first.bannedUntil, first.now + 1_000)
      const during = await store.consume(id, ask(limits, BAN))
      t.equal(during.outcome, 'key_banned')
      t.equal(during.bannedUntil, first.bannedUntil, 'requests during a ban do not extend it')
      t.same((await store.admin.listBans()).filter((b) => b.id === id), [{ id, until: first.bannedUntil }])
      const peeked = await store.peek(id, ask(limits))
      t.equal(peeked.outcome, 'key_banned')
      t.equal(peeked.minute.count, 1, 'peek still reads a banned consumer\'s windows (ops usage view)')
      t.equal(await store.admin.escalationLevel(id), 0)

      await h.pass(first.bannedUntil - await h.now() + 5)
      const second = await consumeN(store, id, limits, 4, BAN)
      t.same(second.map((r) => r.outcome), ['rate_limited', 'rate_limited', 'rate_limited', 'ban_started'], 'requests during the ban were not counted as 429s')
      t.equal(second[3]!.bannedUntil, second[3]!.now + 2_000, 'the second ban within 24 h doubles')
      t.equal(await store.admin.escalationLevel(id), 1)
      await h.pass(second[3]!.bannedUntil - await h.now() + 5)
      const third = (await consumeN(store, id, limits, 4, BAN))[3]!
      t.equal(third.bannedUntil, third.now + 3_000, 'capped at the maximum')

      t.equal(await store.admin.liftBan(id), true)
      t.equal(await store.admin.liftBan(id), false)
      t.same((await store.admin.listBans()).filter((b) => b.id === id), [])
      t.equal(await store.admin.escalationLevel(id), -1, 'a lift forgets the escalation')
      t.equal((await store.consume(id, ask(limits, BAN))).outcome, 'rate_limited', 'lifted: limited again, not banned')

      await store.admin.reset(id)
      t.equal((await store.consume(id, ask(limits, BAN))).outcome, 'ok', 'reset: the windows are empty')
      const again = (await consumeN(store, id, limits, 4, BAN))[3]!
      t.equal(again.outcome, 'ban_started')
      t.equal(again.bannedUntil, again.now + 1_000, 'reset forgot the escalation: the base duration again')
      await store.admin.reset(id)
      t.same((await store.admin.listBans()).filter((b) => b.id === id), [], 'reset ends the ban')
      t.equal((await store.consume(id, ask(limits, BAN))).outcome, 'ok')
    })

    t.test('a burst of rejections in one call counts each 429: the crossing one starts the ban, those after find it', async (t) => {
      await bucketStart(h)
      const id = fresh()
      const limits = { perMinute: 2, perDay: 1000 }
      const results = await Promise.all(Array.from({ length: 9 }, async () => await store.consume(id, ask(limits, BAN))))
      const outcomes = results.map((r) => r.outcome)
      t.same(outcomes.filter((o) => o === 'ok').length, 2)
      t.same(outcomes.filter((o) => o === 'rate_limited').length, 3, 'the threshold\'s 429s')
      t.same(outcomes.filter((o) => o === 'ban_started').length, 1, 'one ban')
      t.same(outcomes.filter((o) => o === 'key_banned').length, 3)
      await store.admin.reset(id)
    })

    t.test('429s spread wider than the ban window do not ban', async (t) => {
      const id = fresh()
      const limits = { perMinute: 1, perDay: 1000 }
      const wide: BanPolicy = { ...BAN, windowSeconds: 1 }
      await store.consume(id, ask(limits, wide))
      const outcomes: string[] = []
      for (let i = 0; i < 6; i++) {
        outcomes.push((await store.consume(id, ask(limits, wide))).outcome)
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
  t.equal((await store.consume('edge', ask(limits))).outcome, 'rate_limited', 'a fixed window would admit here')
  clock.now = base + 119_899
  t.equal((await store.consume('edge', ask(limits))).outcome, 'rate_limited', '59.999 s after the burst: still inside its rolling minute')
  clock.now = base + 120_000
  t.equal((await store.consume('edge', ask(limits))).outcome, 'ok', 'the burst\'s bucket has left the window')

  const day = { perMinute: 1000, perDay: 10 }
  const dayBase = T0 + 10 * 86_400_000
  for (let i = 0; i < 10; i++) {
    clock.now = dayBase + i * 3_600_000
    await store.consume('day', ask(day))
  }
  clock.now = dayBase + 97 * DAY_WINDOW.bucketMs - 1
  t.equal((await store.consume('day', ask(day))).outcome, 'rate_limited')
  clock.now = dayBase + 97 * DAY_WINDOW.bucketMs
  t.equal((await store.consume('day', ask(day))).outcome, 'ok', 'the first hour\'s bucket left the day window')

  const later = 'later'
  clock.now = dayBase + 200 * 86_400_000
  await consumeN(store, later, { perMinute: 1, perDay: 1000 }, 5, BAN)
  clock.now += 1_000 + 86_400_000
  t.equal((await consumeN(store, later, { perMinute: 1, perDay: 1000 }, 5, BAN))[4]!.bannedUntil, clock.now + 1_000, 'a ban more than 24 h after the last one starts at the base duration again')
})

t.test('an id\'s keys share a Cluster slot, stay compact and expire when idle', async (t) => {
  const redis = await startRedis(t)
  const store = await createStore({ redisUrl: redis.url })
  t.teardown(() => store.close())
  const limits = { perMinute: 100_000, perDay: 1_000_000 }
  const id = 'busy-key'
  // The hash a consumer busy in every second of the last minute has (lua/grant.lua's layout: a
  // bucket's field is its tag × 2^32 + units), written as the script would, then one request.
  const [seconds] = (await redis.cli('TIME')).split('\n').map(Number)
  const now = seconds!
  const fields: string[] = []
  for (let b = now - 59; b < now; b++) fields.push(String(b % 61), String((b % 2 ** 20) * 2 ** 32 + 3))
  const day = Math.floor(now * 1000 / DAY_WINDOW.bucketMs)
  await redis.cli('HSET', limiterKey(id), ...fields, FIELD.minuteNewest, String(now - 1), FIELD.minuteUnits, String(3 * 59), FIELD.minuteOldest, String(now - 59), FIELD.dayNewest, String(day), FIELD.dayUnits, String(3 * 59), FIELD.dayOldest, String(day), FIELD.dayNewestUnits, String(3 * 59))
  const result = await store.consume(id, ask(limits))
  // A bucket counts until 61 s after its start: the buckets written that are still in the window at
  // the decision's own Redis time (all 59 unless a loaded machine took seconds between TIME and it).
  const decidedAt = Math.floor(result.now / 1000)
  const stillIn = Array.from({ length: 59 }, (_, i) => now - 59 + i).filter((b) => b >= decidedAt - 60).length
  t.comment(`TIME ${now}, decided at ${decidedAt}: ${stillIn} of the 59 written buckets in the window`)
  t.equal(result.minute.count, 3 * stillIn + 1, 'the busy minute is read as written, plus this request')
  const count = Number(await redis.cli('HLEN', limiterKey(id)))
  t.ok(count <= 61 + 16, `fields bounded by the minute's buckets and the script's own (${count})`)
  t.equal(await redis.cli('OBJECT', 'ENCODING', limiterKey(id)), 'listpack', 'the hash stays compact')
  const bytes = Number(await redis.cli('MEMORY', 'USAGE', limiterKey(id), 'SAMPLES', '0'))
  t.ok(bytes <= 2048, `MEMORY USAGE of a busy id: ${bytes} bytes`)
  t.comment(`MEMORY USAGE of a busy id: ${bytes} bytes (${count} fields)`)
  const ttl = Number(await redis.cli('PTTL', limiterKey(id)))
  t.ok(ttl > 0 && ttl <= 97 * DAY_WINDOW.bucketMs + 1000, `expires after its day window (${ttl} ms)`)
  const slots = new Set(await Promise.all([limiterKey('acme-prod'), dayKey('acme-prod')].map((k) => redis.cli('CLUSTER', 'KEYSLOT', k))))
  t.equal(slots.size, 1, 'one hash tag, one slot')
})
