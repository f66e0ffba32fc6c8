// Settings → store, and a real Redis going away and coming back under STORE_ON_ERROR=closed: the
// gateway answers 503 fast (never hangs), readiness fails, and it recovers by itself (reconnect,
// script reloaded on NOSCRIPT). The other policies are in faults.test.ts.
import t from 'tap'
import { createStore } from '../../../src/gateway/limiter/create-store.js'
import { askOf } from '../../../src/gateway/limiter/store.js'
import { createRedisClient, describeRedis as describeSettings } from '../../../src/gateway/redis/connection.js'
import { startGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS } from '../../helpers/config-fixture.js'
import { EVENT_TIMEOUT_MS, poll } from '../../helpers/poll.js'
import { freePort } from '../../helpers/ports.js'
import { startRedis } from '../../helpers/redis.js'

t.test('no Redis settings: the in-process store', async (t) => {
  const store = await createStore({})
  const health = store.health
  t.equal(store.describe().kind, 'memory')
  t.equal(await health.probe(), 'ok')
  t.equal(health.fallbackActive(), false)
  await store.close()
})

t.test('Sentinel settings make a Sentinel client', async (t) => {
  const client = createRedisClient({ redisSentinels: ['10.0.0.1:26379', '10.0.0.2'], redisSentinelName: 'pets', redisUrl: 'redis://:s3cret@ignored' })
  t.ok(client)
  const options = client!.options as { sentinels?: unknown, name?: string, password?: string }
  t.same(options.sentinels, [{ host: '10.0.0.1', port: 26379 }, { host: '10.0.0.2', port: 6379 }])
  t.equal(options.name, 'pets')
  t.equal(options.password, 's3cret')
  client!.disconnect()
})

t.test('an unreachable Redis errors fast instead of hanging', async (t) => {
  const port = await freePort()
  const errors: Error[] = []
  const store = await createStore({ redisUrl: `redis://127.0.0.1:${port}`, storeOnError: 'closed' }, { readyWaitMs: 100, onError: (err) => errors.push(err) })
  const health = store.health
  t.equal(store.describe().kind, 'redis')
  const started = Date.now()
  await t.rejects(store.consume('k', askOf({ perMinute: 1, perDay: 1 })))
  // A connection refused on loopback is at once; the bound only has to tell it from a hang, on a busy machine too.
  const rejectedMs = Date.now() - started
  t.ok(rejectedMs < 2_000, `rejected in ${rejectedMs} ms, not left hanging`)
  // The call fails once its 100 ms wait for readiness ends; the connection's own error (its attempt refused) can come
  // after that on a loaded machine (a paired suite run saw none yet). Awaited, not assumed.
  t.ok(await poll(() => errors.length > 0, EVENT_TIMEOUT_MS), `connection errors reach the handler (${errors.length})`)
  t.ok(health.errors() > 0, 'and the failed call is counted')
  await store.close()
})

t.test('closed policy: Redis stops and comes back: 503 and not ready, then recovery', async (t) => {
  const redis = await startRedis(t)
  const gw = await startGateway(t, { limiter: { settings: { redisUrl: redis.url, storeOnError: 'closed' } } })
  const get = async (): Promise<number> => {
    const res = await fetch(`${gw.url}/v1/pets`, { headers: bearer(DEMO_KEYS.business) })
    await res.arrayBuffer()
    return res.status
  }
  t.equal(await get(), 200)
  await redis.stop()
  const started = Date.now()
  t.equal(await get(), 503)
  const answeredMs = Date.now() - started
  t.ok(answeredMs < 5_000, `answered in ${answeredMs} ms (the store's timeout is 50 ms; a hang would be the client's whole wait)`)
  const ready = await fetch(`${gw.adminUrl}/readyz`)
  t.equal(ready.status, 503, 'readiness fails while the store is down')
  t.match(await ready.json(), { checks: { store: { ok: false } } })
  await redis.start()
  t.ok(await poll(async () => await get() === 200, EVENT_TIMEOUT_MS, 50), 'recovers by itself once Redis is back')
})

t.test('the store describes itself by kind and host:port, never credentials', async (t) => {
  t.same(describeSettings({}), { kind: 'memory', nodes: [] })
  t.same(describeSettings({ redisUrl: 'rediss://:s3cret@cache.internal:6380/0' }), { kind: 'redis', nodes: ['cache.internal:6380'] })
  t.same(describeSettings({ redisUrl: 'redis://user:pw@10.0.0.5' }), { kind: 'redis', nodes: ['10.0.0.5:6379'] })
  t.same(describeSettings({ redisSentinels: ['10.0.0.1:26379'], redisUrl: 'redis://:s3cret@x' }), { kind: 'sentinel', nodes: ['10.0.0.1:26379'] })
  t.same(describeSettings({ redisClusterNodes: ['a:7000', 'b:7001'] }), { kind: 'cluster', nodes: ['a:7000', 'b:7001'] })
  t.notMatch(JSON.stringify(describeSettings({ redisUrl: 'redis://:s3cret@h:1' })), /s3cret/)
})

t.test('local policy: readiness contacts Redis, stays 200 while it is down and says fallback', async (t) => {
  const redis = await startRedis(t)
  const gw = await startGateway(t, { limiter: { settings: { redisUrl: redis.url } } })
  const store = async (): Promise<{ status: number, store: Record<string, unknown> | undefined }> => {
    const res = await fetch(`${gw.adminUrl}/readyz`)
    return { status: res.status, store: (await res.json() as { checks: Record<string, Record<string, unknown>> }).checks.store }
  }
  t.same(await store(), { status: 200, store: { ok: true, kind: 'redis', nodes: [`127.0.0.1:${redis.port}`], state: 'ok' } })
  await redis.stop()
  t.match(await store(), { status: 200, store: { ok: true, state: 'fallback' } }, 'Redis down: ready, answering from the fallback')
  await redis.start()
  const back = await poll(async () => { const now = await store(); return now.store?.state === 'ok' && now }, EVENT_TIMEOUT_MS, 100)
  t.equal(back && back.store?.state, 'ok', 'back to ok once Redis answers')
})

t.test('a maxmemory-policy that can evict keyed windows is named at start and in readiness', async (t) => {
  const redis = await startRedis(t, ['--maxmemory', '64mb', '--maxmemory-policy', 'allkeys-lru'])
  const gw = await startGateway(t, { limiter: { settings: { redisUrl: redis.url } } })
  t.ok(gw.logs.some((l) => l.level === 40 && String(l.msg).includes('allkeys-lru')), 'a warning at start')
  const ready = await (await fetch(`${gw.adminUrl}/readyz`)).json() as { checks: Record<string, Record<string, unknown>> }
  t.match(ready.checks.store, { ok: true, warning: /allkeys-lru.*noeviction or volatile/ })

  const safe = await startRedis(t, ['--maxmemory-policy', 'volatile-lru'])
  const quiet = await startGateway(t, { limiter: { settings: { redisUrl: safe.url } } })
  t.notOk(quiet.logs.some((l) => String(l.msg).includes('maxmemory-policy')), 'volatile-lru: no warning')
})
