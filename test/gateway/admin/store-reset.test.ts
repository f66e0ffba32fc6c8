// The stores' part of a consumer reset: `escalationLevel` and `reset` on the in-process store and a
// real Redis (standalone and Cluster: the multi-key DEL must stay in one slot), each as production
// builds it. The in-process store runs on a virtual clock; Redis on its own TIME, with 1 s bans so
// waiting for a ban's end stays short.
import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import type { BanPolicy, Limits } from '../../../src/gateway/config/types.js'
import { createStore } from '../../../src/gateway/limiter/create-store.js'
import { createMemoryStore } from '../../../src/gateway/limiter/memory/store.js'
import { BAN_LIFT_CHANNEL } from '../../../src/gateway/limiter/redis/admin.js'
import { askOf, type LimiterStore } from '../../../src/gateway/limiter/store.js'
import { EVENT_TIMEOUT_MS, sleep, until } from '../../helpers/poll.js'
import { startRedis, startRedisCluster } from '../../helpers/redis.js'

const T0 = Date.UTC(2030, 0, 1)
const LIMITS: Limits = { perMinute: 2, perDay: 100 }
const BAN: BanPolicy = { threshold: 1, windowSeconds: 60, durationSeconds: 1, maxDurationSeconds: 100 }

interface Harness {
  store: LimiterStore
  /** Moves the store's time past `until` (Unix ms by the store's clock). */
  passTime: (until: number) => Promise<void>
}

/** A real wait past `end` (Redis runs on its own TIME). */
async function sleepPast (end: number): Promise<void> {
  await sleep(Math.max(0, end - Date.now() + 20))
}

const factories: Record<string, (t: Test) => Promise<Harness>> = {
  memory: async () => {
    const clock = { now: T0 }
    return { store: createMemoryStore({ now: () => clock.now }), passTime: async (until) => { clock.now = until + 1 } }
  },
  redis: async (t) => {
    const redis = await startRedis(t)
    const store = await createStore({ redisUrl: redis.url })
    t.teardown(() => store.close())
    return { store, passTime: sleepPast }
  },
  cluster: async (t) => {
    const cluster = await startRedisCluster(t)
    const store = await createStore({ redisClusterNodes: cluster.nodes }, { readyWaitMs: 5_000 })
    t.teardown(() => store.close())
    return { store, passTime: sleepPast }
  }
}

/** Fills the minute and sends 429s until a ban starts; returns how long it lasts, by the store's clock. */
async function banOnce (store: LimiterStore, id: string): Promise<{ until: number, duration: number }> {
  for (let i = 0; i < 10; i++) {
    const r = await store.consume(id, askOf(LIMITS, BAN))
    if (r.outcome === 'ban_started') return { until: r.bannedUntil, duration: r.bannedUntil - r.now }
  }
  throw new Error('no ban started')
}

for (const [kind, factory] of Object.entries(factories)) {
  t.test(`${kind} store: escalation level and reset`, async (t) => {
    const { store, passTime } = await factory(t)
    t.equal(await store.admin.escalationLevel('a'), -1, 'nothing remembered')
    t.equal(await store.admin.reset('a'), false, 'nothing to reset')

    const first = await banOnce(store, 'a')
    t.equal(first.duration, 1_000)
    t.equal(await store.admin.escalationLevel('a'), 0, 'first ban: base duration')
    await passTime(first.until)
    t.equal((await store.consume('a', askOf(LIMITS, BAN))).outcome, 'rate_limited', 'the minute is still full after the ban')
    const second = await banOnce(store, 'a')
    t.equal(second.duration, 2_000, 'second ban doubled')
    t.equal(await store.admin.escalationLevel('a'), 1)
    await store.consume('b', askOf(LIMITS, BAN))

    t.equal(await store.admin.reset('a'), true)
    const peek = await store.peek('a', askOf(LIMITS))
    t.match(peek, { outcome: 'ok', bannedUntil: 0, minute: { count: 0 }, day: { count: 0 } }, 'windows and ban gone')
    t.equal(await store.admin.escalationLevel('a'), -1, 'escalation forgotten')
    t.same(await store.admin.listBans(), [])
    t.equal((await store.peek('b', askOf(LIMITS))).minute.count, 1, 'another id is untouched')
    t.equal((await banOnce(store, 'a')).duration, 1_000, 'the next ban starts at the base duration again')
  })
}

t.test('redis reset tells every process to drop its cached ban', async (t) => {
  const redis = await startRedis(t)
  const store = await createStore({ redisUrl: redis.url })
  t.teardown(() => store.close())
  const heard: Array<string | undefined> = []
  const subscriber = new Redis(redis.url)
  t.teardown(() => { subscriber.disconnect() })
  await subscriber.subscribe(BAN_LIFT_CHANNEL)
  subscriber.on('message', (_channel: string, id: string) => heard.push(id))
  await store.admin.reset('acme')
  await until('the reset published', () => heard.length > 0, EVENT_TIMEOUT_MS, 10)
  t.same(heard, ['acme'])
})
