// The stores' part of a consumer reset: `escalationLevel` and `reset` on the in-process store, a
// real Redis (standalone and Cluster: the multi-key DEL must stay in one slot) and the resilient
// wrapper, with the same virtual clock the store contract suite uses.
import { Cluster, Redis } from 'ioredis'
import t, { type Test } from 'tap'
import type { BanPolicy, Limits } from '../../../src/gateway/config/types.js'
import type { LimiterStore } from '../../../src/gateway/limiter/store.js'
import { createMemoryStore } from '../../../src/gateway/limiter/stores/memory.js'
import { BAN_LIFT_CHANNEL, createRedisStore } from '../../../src/gateway/limiter/stores/redis.js'
import { createResilientStore } from '../../../src/gateway/limiter/stores/resilient.js'
import { startRedis, startRedisCluster } from '../../helpers/redis.js'

const T0 = Date.UTC(2030, 0, 1)
const LIMITS: Limits = { perMinute: 2, perDay: 100 }
const BAN: BanPolicy = { threshold: 1, windowSeconds: 60, durationSeconds: 10, maxDurationSeconds: 100 }

interface Harness { store: LimiterStore, clock: { now: number } }

const factories: Record<string, (t: Test) => Promise<Harness>> = {
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

/** Fills the minute and sends 429s until a ban starts; returns its end. */
async function banOnce (store: LimiterStore, id: string): Promise<number> {
  for (let i = 0; i < 10; i++) {
    const r = await store.consume(id, LIMITS, BAN)
    if (r.outcome === 'ban_started') return r.bannedUntil
  }
  throw new Error('no ban started')
}

for (const [kind, factory] of Object.entries(factories)) {
  t.test(`${kind} store: escalation level and reset`, async (t) => {
    const { store, clock } = await factory(t)
    t.equal(await store.escalationLevel('a'), -1, 'nothing remembered')
    t.equal(await store.reset('a'), false, 'nothing to reset')

    const until = await banOnce(store, 'a')
    t.equal(until, clock.now + 10_000)
    t.equal(await store.escalationLevel('a'), 0, 'first ban: base duration')
    clock.now = until + 1
    t.equal((await store.consume('a', LIMITS, BAN)).outcome, 'rate_limited', 'the minute is still full after the ban')
    const second = await banOnce(store, 'a')
    t.equal(second - clock.now, 20_000, 'second ban doubled')
    t.equal(await store.escalationLevel('a'), 1)
    await store.consume('b', LIMITS, BAN)

    t.equal(await store.reset('a'), true)
    const peek = await store.peek('a', LIMITS)
    t.match(peek, { outcome: 'ok', bannedUntil: 0, minute: { count: 0 }, day: { count: 0 } }, 'windows and ban gone')
    t.equal(await store.escalationLevel('a'), -1, 'escalation forgotten')
    t.same(await store.listBans(), [])
    t.equal((await store.peek('b', LIMITS)).minute.count, 1, 'another id is untouched')
    t.equal((await banOnce(store, 'a')) - clock.now, 10_000, 'the next ban starts at the base duration again')
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
  const started = Date.now()
  while (heard.length === 0 && Date.now() - started < 2000) await new Promise((resolve) => setTimeout(resolve, 10))
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
