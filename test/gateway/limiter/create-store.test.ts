// Settings → store, and a real Redis going away and coming back under STORE_ON_ERROR=closed: the
// gateway answers 503 fast (never hangs), readiness fails, and it recovers by itself (reconnect,
// script reloaded on NOSCRIPT). The other policies are in faults.test.ts.
import t from 'tap'
import { createRedisClient, createStore } from '../../../src/gateway/limiter/create-store.js'
import { bearer, DEMO_KEYS, startGateway } from '../../helpers/gateway.js'
import { freePort } from '../../helpers/ports.js'
import { startRedis } from '../../helpers/redis.js'

t.test('no Redis settings: the in-process store', async (t) => {
  const store = await createStore({})
  t.equal(store.kind, 'memory')
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
  t.equal(store.kind, 'redis')
  const started = Date.now()
  await t.rejects(store.consume('k', { perMinute: 1, perDay: 1 }, null))
  t.ok(Date.now() - started < 200, 'rejected at once')
  t.ok(errors.length > 0, 'connection errors reach the handler')
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
  t.ok(Date.now() - started < 1000, 'answered quickly')
  const ready = await fetch(`${gw.adminUrl}/readyz`)
  t.equal(ready.status, 503, 'readiness fails while the store is down')
  t.match(await ready.json(), { checks: { store: { ok: false } } })
  await redis.start()
  let status = 0
  for (let i = 0; i < 100 && status !== 200; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    status = await get()
  }
  t.equal(status, 200, 'recovers by itself once Redis is back')
})
