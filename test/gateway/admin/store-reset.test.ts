// The stores' part of a consumer reset: `escalationLevel` and `reset` on the in-process store, a
// real Redis (standalone and Cluster: the multi-key DEL must stay in one slot) and the resilient
// wrapper. The in-process store runs on a virtual clock; Redis on its own TIME, with 1 s bans so
// waiting for a ban's end stays short.
import { Cluster, Redis } from 'ioredis'
import t, { type Test } from 'tap'
import type { BanPolicy, Limits } from '../../../src/gateway/config/types.js'
import type { LimiterStore } from '../../../src/gateway/limiter/store.js'
import { createMemoryStore } from '../../../src/gateway/limiter/stores/memory.js'
import { BAN_LIFT_CHANNEL, createRedisStore } from '../../../src/gateway/limiter/stores/redis.js'
import { createResilientStore } from '../../../src/gateway/limiter/stores/resilient.js'
import { poll, sleep } from '../../helpers/poll.js'
import { startRedis, startRedisCluster } from '../../helpers/redis.js'

const T0 = Date.UTC(2030, 0, 1)
const LIMITS: Limits = { perMinute: 2, perDay: 100 }
const BAN: BanPolicy = { threshold: 1, windowSeconds: 60, durationSeconds: 1, maxDurationSeconds: 100 }

interface Harness {
  store: LimiterStore
  /** Moves the store's time past `until` (Unix ms by the store's clock). */
  passTime: (until: number) => Promise<void>
}

async function sleepPast (until: number): Promise<void> {
  const left = until - Date.now() + 20
  if (left > 0) await sleep(left)
}

const factories: Record<string, (t: Test) => Promise<Harness>> = {
  memory: async () => {
    const clock = { now: T0 }
    return { store: createMemoryStore({ now: () => clock.now }), passTime: async (until) => { clock.now = until + 1 } }
  },
  redis: async (t) => {
    const redis = await startRedis(t)
    const store = createRedisStore(new Redis(redis.url, { enableOfflineQueue: true }))
    t.teardown(() => store.close())
    return { store, passTime: sleepPast }
  },
  cluster: async (t) => {
    const cluster = await startRedisCluster(t)
    const client = new Cluster(cluster.nodes.map((n) => ({ host: '127.0.0.1', port: Number(n.split(':')[1]) })))
    await new Promise((resolve) => client.once('ready', resolve))
    const store = createRedisStore(client)
    t.teardown(() => store.close())
    return { store, passTime: sleepPast }
  }
}

/** Fills the minute and sends 429s until a ban starts; returns how long it lasts, by the store's clock. */
async function banOnce (store: LimiterStore, id: string): Promise<{ until: number, duration: number }> {
  for (let i = 0; i < 10; i++) {
    const r = await store.consume(id, LIMITS, BAN)
    if (r.outcome === 'ban_started') return { until: r.bannedUntil, duration: r.bannedUntil - r.now }
  }
  throw new Error('no ban started')
}

for (const [kind, factory] of Object.entries(factories)) {
  t.test(`${kind} store: escalation level and reset`, async (t) => {
    const { store, passTime } = await factory(t)
    t.equal(await store.escalationLevel('a'), -1, 'nothing remembered')
    t.equal(await store.reset('a'), false, 'nothing to reset')

    const first = await banOnce(store, 'a')
    t.equal(first.duration, 1_000)
    t.equal(await store.escalationLevel('a'), 0, 'first ban: base duration')
    await passTime(first.until)
    t.equal((await store.consume('a', LIMITS, BAN)).outcome, 'rate_limited', 'the minute is still full after the ban')
    const second = await banOnce(store, 'a')
    t.equal(second.duration, 2_000, 'second ban doubled')
    t.equal(await store.escalationLevel('a'), 1)
    await store.consume('b', LIMITS, BAN)

    t.equal(await store.reset('a'), true)
    const peek = await store.peek('a', LIMITS)
    t.match(peek, { outcome: 'ok', bannedUntil: 0, minute: { count: 0 }, day: { count: 0 } }, 'windows and ban gone')
    t.equal(await store.escalationLevel('a'), -1, 'escalation forgotten')
    t.same(await store.listBans(), [])
    t.equal((await store.peek('b', LIMITS)).minute.count, 1, 'another id is untouched')
    t.equal((await banOnce(store, 'a')).duration, 1_000, 'the next ban starts at the base duration again')
  })
}

t.test('redis reset tells every process to drop its cached ban', async (t) => {
  const redis = await startRedis(t)
  const store = createRedisStore(new Redis(redis.url, { enableOfflineQueue: true }))
  t.teardown(() => store.close())
  const heard: Array<string | undefined> = []
  const subscriber = new Redis(redis.url)
  t.teardown(() => { subscriber.disconnect() })
  await subscriber.subscribe(BAN_LIFT_CHANNEL)
  subscriber.on('message', (_channel: string, id: string) => heard.push(id))
  await store.reset('acme')
  await poll(() => heard.length > 0, 2000, 10)
  t.same(heard, ['acme'])
})

t.test('resilient store: reset clears Redis and the local fallback; escalation reads Redis', async (t) => {
  const clock = { now: T0 }
  const primary = createMemoryStore({ now: () => clock.now })
  const fallback = createMemoryStore({ now: () => clock.now })
  const store = createResilientStore(primary, { fallback })
  await banOnce(primary, 'a')
  await fallback.consume('a', LIMITS, BAN)
  t.equal(await store.escalationLevel('a'), 0)
  t.equal(await store.reset('a'), true)
  t.equal((await primary.peek('a', LIMITS)).minute.count, 0)
  t.equal((await fallback.peek('a', LIMITS)).minute.count, 0, 'counts made during an outage are cleared too')
  t.equal(await store.reset('a'), false)
})
