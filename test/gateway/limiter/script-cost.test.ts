// What a decision costs Redis: INFO commandstats usec_per_call of our script (admitting, and
// rejecting a consumer over its limit; one decision per call, then 100 per decide-batch call) next
// to @fastify/rate-limit's fixed-window INCR script (what the stock assembly runs), on the same
// redis-server, 100 consumers round robin after a warm-up. The bound is loose (the machine is
// shared); the numbers are printed for the README and reports.
import { createRequire } from 'node:module'
import { Redis } from 'ioredis'
import t from 'tap'
import { createRedisStore, REDIS_BATCH_MAX } from '../../../src/gateway/limiter/stores/redis.js'
import { startRedis } from '../../helpers/redis.js'

type Incr = (key: string, cb: (err: Error | null) => void, timeWindow: number, max: number) => void
const StockRedisStore = createRequire(import.meta.url)('@fastify/rate-limit/store/RedisStore.js') as
  new (continueExceeding: boolean, exponentialBackoff: boolean, redis: Redis) => { incr: Incr }

const CALLS = 5_000
const CONSUMERS = 100

async function usecPerCall (cli: (...args: string[]) => Promise<string>): Promise<{ calls: number, usec: number }> {
  const line = /cmdstat_evalsha:calls=(\d+),usec=(\d+),usec_per_call=([\d.]+)/.exec(await cli('INFO', 'commandstats'))
  return { calls: Number(line?.[1] ?? 0), usec: Number(line?.[3] ?? 0) }
}

t.test('script CPU per call: ours vs @fastify/rate-limit', async (t) => {
  const redis = await startRedis(t)
  const client = new Redis(redis.url)
  const store = createRedisStore(client, { batchMax: 1 })
  t.teardown(() => store.close())
  const batched = createRedisStore(new Redis(redis.url), { batchMax: REDIS_BATCH_MAX })
  t.teardown(() => batched.close())
  const roomy = { perMinute: 1_000_000, perDay: 10_000_000 }
  const ban = { threshold: 30, windowSeconds: 60, durationSeconds: 900, maxDurationSeconds: 86400 }
  const run = async (call: (i: number) => Promise<unknown>): Promise<void> => {
    for (let i = 0; i < CALLS; i += 100) await Promise.all(Array.from({ length: 100 }, async (_, k) => await call(i + k)))
  }

  await run(async (i) => await store.consume(`warm-${i % CONSUMERS}`, roomy, ban))
  await redis.cli('CONFIG', 'RESETSTAT')
  await run(async (i) => await store.consume(`c-${i % CONSUMERS}`, roomy, ban))
  const admit = await usecPerCall(redis.cli)

  const full = { perMinute: 1, perDay: 10_000_000 }
  const noBan = { ...ban, threshold: 1_000_000 }
  await run(async (i) => await store.consume(`c-${i % CONSUMERS}`, full, noBan))
  await redis.cli('CONFIG', 'RESETSTAT')
  await run(async (i) => await store.consume(`c-${i % CONSUMERS}`, full, noBan))
  const reject = await usecPerCall(redis.cli)

  await run(async (i) => await batched.consume(`warm-${i % CONSUMERS}`, roomy, ban))
  await redis.cli('CONFIG', 'RESETSTAT')
  await run(async (i) => await batched.consume(`c-${i % CONSUMERS}`, roomy, ban))
  const batch = await usecPerCall(redis.cli)

  const stockClient = new Redis(redis.url)
  t.teardown(() => stockClient.disconnect())
  const stock = new StockRedisStore(false, false, stockClient)
  const incr = async (key: string): Promise<void> => { await new Promise<void>((resolve, reject) => { stock.incr(key, (err) => { if (err === null) resolve(); else reject(err) }, 60_000, 1_000_000_000) }) }
  await run(async (i) => { await incr(`warm-${i % CONSUMERS}`) })
  await redis.cli('CONFIG', 'RESETSTAT')
  await run(async (i) => { await incr(`stock-${i % CONSUMERS}`) })
  const fixed = await usecPerCall(redis.cli)

  t.equal(admit.calls, CALLS, 'one script call per admitted decision')
  t.equal(reject.calls, CALLS, 'one script call per rejected decision')
  t.equal(batch.calls, CALLS / 100, 'one decide-batch call per turn of 100 decisions')
  t.equal(fixed.calls, CALLS)
  t.ok(admit.usec < 6 * fixed.usec, `admit ${admit.usec} µs vs stock ${fixed.usec} µs per call`)
  t.comment(`usec_per_call: ours admit ${admit.usec}, ours reject (429 counted) ${reject.usec}, ours admit in batches of 100 ${(batch.usec / 100).toFixed(2)} per decision, @fastify/rate-limit ${fixed.usec}`)
})
