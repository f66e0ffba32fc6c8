// Leases against a real Redis: two stores with their own clients (two processes' worth) hammer one
// consumer at its limit across real bucket edges. Every admission must land in the minute bucket
// Redis counted it in (its admit time by Redis TIME), no rolling minute may hold more than the limit,
// and once the leases are handed back Redis holds exactly what was admitted. Also: Redis commands
// per request on a hot consumer (leases) and on 1,000 cold ones (one EVALSHA each; batching is off
// by default), by INFO commandstats. Steady traffic over more than a window runs the real scripts on the Lua VM's
// virtual clock (test/helpers/lua-redis.ts) instead of waiting for it.
import { Redis } from 'ioredis'
import t from 'tap'
import type { ConsumeResult, LimiterStore } from '../../../src/gateway/limiter/store.js'
import { createLeasedStore, type LeasedStore } from '../../../src/gateway/limiter/stores/leases.js'
import { BAN_LIFT_CHANNEL, createRedisStore, redisKeys } from '../../../src/gateway/limiter/stores/redis.js'
import { createLuaRedis, LUA_EPOCH_MS } from '../../helpers/lua-redis.js'
import { createLuaStore } from '../../helpers/lua-store.js'
import { startRedis } from '../../helpers/redis.js'
import { poll, sleep, until } from '../../helpers/poll.js'

function leased (url: string, holder: string): LeasedStore {
  return createLeasedStore(createRedisStore(new Redis(url)), { holder })
}

/** Commands Redis ran at top level (a script's own calls are counted too by INFO; leave them out). */
async function topLevelCommands (cli: (...args: string[]) => Promise<string>): Promise<{ total: number, evalsha: number }> {
  const inScript = new Set(['time', 'hmget', 'hget', 'hset', 'hdel', 'del', 'pexpire', 'pttl'])
  let total = 0
  let evalsha = 0
  for (const line of (await cli('INFO', 'commandstats')).split('\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim())
    if (match === null || inScript.has(match[1]!) || ['info', 'config|resetstat'].includes(match[1]!)) continue
    total += Number(match[2])
    if (match[1] === 'evalsha' || match[1] === 'eval') evalsha += Number(match[2]) // EVAL: a new connection's first call
  }
  return { total, evalsha }
}

function fullestWindow (times: number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b)
  let worst = 0
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[j]! <= sorted[i]! - windowMs) j++
    worst = Math.max(worst, i - j + 1)
  }
  return worst
}

t.test('two processes, one consumer at its limit: never over-admits, every admission in its bucket', async (t) => {
  const redis = await startRedis(t)
  const stores = [leased(redis.url, 'process-a'), leased(redis.url, 'process-b')]
  const limits = { perMinute: 3_000, perDay: 1_000_000 }
  const id = 'hot-consumer'
  const admitted: ConsumeResult[] = []
  let offered = 0
  let leaseHits = 0
  const started = Date.now()
  // ~3.5 s of 2 × 8 concurrent loops: several bucket edges, the limit reached mid-run.
  await Promise.all(stores.flatMap((store) => Array.from({ length: 8 }, async () => {
    while (Date.now() - started < 3_500) {
      offered++
      const before = store.leases()
      const result = await store.consume(id, limits, null)
      if (result.outcome === 'ok') admitted.push(result)
      if (before > 0 && result.outcome === 'ok') leaseHits++
      await sleep(2)
    }
  })))
  await Promise.all(stores.map(async (store) => { await store.close() }))

  const times = admitted.map((r) => r.now)
  t.ok(offered > limits.perMinute * 1.5, `offered ${offered} > the limit`)
  t.ok(leaseHits > admitted.length / 2, `most admissions came from leases (${leaseHits} of ${admitted.length})`)
  t.ok(fullestWindow(times, 60_000) <= limits.perMinute, `fullest rolling minute ${fullestWindow(times, 60_000)} <= ${limits.perMinute}`)
  t.equal(admitted.length, limits.perMinute, 'the whole limit admitted once the leases were handed back')

  // Redis's count of each minute bucket equals the admissions whose Redis time falls in it.
  const byBucket = new Map<number, number>()
  for (const at of times) byBucket.set(Math.floor(at / 1000), (byBucket.get(Math.floor(at / 1000)) ?? 0) + 1)
  const [minuteKey] = redisKeys(id)
  const counted = new Map<number, number>()
  for (const bucket of byBucket.keys()) counted.set(bucket, Number(await redis.cli('HGET', minuteKey, String(bucket % 61))))
  t.same(Object.fromEntries(counted), Object.fromEntries(byBucket), 'per-second buckets: Redis counts = admissions by admit time')
  t.equal(Number(await redis.cli('HGET', minuteKey, 'n')), limits.perMinute, 'running total = admissions: unused leases came back')
  t.comment(`two processes: offered ${offered}, admitted ${admitted.length} (${leaseHits} from leases) over ${byBucket.size} buckets`)
})

t.test('Redis commands per request: hot consumer with leases, 1,000 consumers without', async (t) => {
  const redis = await startRedis(t)
  const store: LimiterStore = leased(redis.url, 'process-a')
  const limits = { perMinute: 1_000_000, perDay: 10_000_000 }

  await redis.cli('CONFIG', 'RESETSTAT')
  let hot = 0
  const started = Date.now()
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (Date.now() - started < 2_000) {
      await store.consume('hot', limits, null)
      hot++
    }
  }))
  const hotStats = await topLevelCommands(redis.cli)
  t.ok(hotStats.total / hot <= 0.1, `hot consumer: ${(hotStats.total / hot).toFixed(4)} commands per request (${hotStats.total} for ${hot})`)

  await store.close()
  const fresh = leased(redis.url, 'process-b')
  t.teardown(() => fresh.close())
  await redis.cli('CONFIG', 'RESETSTAT')
  const cold = 3_000
  for (let i = 0; i < cold; i += 100) {
    await Promise.all(Array.from({ length: 100 }, async (_, k) => await fresh.consume(`consumer-${(i + k) % 1000}`, limits, null)))
  }
  const coldStats = await topLevelCommands(redis.cli)
  t.ok(coldStats.total / cold <= 1, `1,000 consumers: ${(coldStats.total / cold).toFixed(3)} commands per request`)
  t.equal(coldStats.evalsha, cold, 'one script call per cold request')
  t.comment(`commands per request: hot ${(hotStats.total / hot).toFixed(4)} (${hot} requests), 1,000 consumers ${(coldStats.total / cold).toFixed(3)}`)
})

t.test('steady traffic at the limit from two processes with leases, 75 s on a virtual clock: under-admission <= 2 %, never over, Redis counts = admissions', async (t) => {
  // The real scripts on the Lua VM, its TIME and both processes' clocks one virtual clock: the
  // lease deadlines, block sizes and rates run exactly as on a real Redis, without waiting 75 s.
  const clock = { now: Date.UTC(2030, 0, 1, 12) + 137 }
  const redis = createLuaRedis(() => clock.now)
  const stores = ['process-a', 'process-b'].map((holder) => createLeasedStore(createLuaStore(redis), {
    holder, now: () => clock.now, monotonic: () => clock.now, sweepMs: 3_600_000
  }))
  t.teardown(async () => { await Promise.all(stores.map(async (store) => { await store.close() })) })
  const limits = { perMinute: 3_000, perDay: 1_000_000 }
  const perProcessMs = 2 * 60_000 / limits.perMinute // each process offers half the limit: 25/s, above the lease rate
  const durationMs = 75_000 // more than a window, so the window is full for the last 15 s
  const started = clock.now
  const offered: number[] = []
  const admitted: ConsumeResult[] = []
  let leaseHits = 0
  // Both processes' requests in time order, each decided at its instant.
  for (let i = 0; started + i * perProcessMs / 2 <= started + durationMs; i++) {
    clock.now = started + i * perProcessMs / 2
    const store = stores[i % 2]!
    offered.push(clock.now)
    const before = store.leases()
    const result = await store.consume('steady', limits, null)
    if (result.outcome === 'ok') {
      admitted.push(result)
      if (before > 0 && store.leases() > 0) leaseHits++
    }
  }
  // The ideal: an exact per-request log over the same offered instants.
  const log: number[] = []
  for (const at of offered) {
    if (log.filter((x) => x > at - 60_000).length < limits.perMinute) log.push(at)
  }
  const times = admitted.map((r) => r.now + LUA_EPOCH_MS)
  const under = (log.length - admitted.length) / log.length * 100
  t.ok(leaseHits > admitted.length / 2, `most admissions came from leases (${leaseHits} of ${admitted.length})`)
  t.ok(fullestWindow(times, 60_000) <= limits.perMinute, `fullest rolling minute ${fullestWindow(times, 60_000)}`)
  t.ok(under <= 2, `under-admission ${under.toFixed(2)} % (${admitted.length} admitted, ideal ${log.length}, offered ${offered.length})`)

  await Promise.all(stores.map(async (store) => { await store.close() }))
  const [minuteKey] = redisKeys('steady')
  const lastBucket = Math.floor(admitted.at(-1)!.now / 1000)
  for (let bucket = lastBucket - 59; bucket <= lastBucket; bucket++) {
    const inBucket = admitted.filter((r) => Math.floor(r.now / 1000) === bucket).length
    t.equal(Number(redis.hget(minuteKey, String(bucket % 61)) ?? 0), inBucket, `bucket ${bucket}: Redis counts exactly the admissions made in it`)
  }
  t.comment(`steady at the limit, two processes, leases, virtual clock: under-admission ${under.toFixed(2)} %, ${leaseHits} of ${admitted.length} from leases`)
})

t.test('a reset in another process ends this process\'s lease at once', async (t) => {
  const redis = await startRedis(t)
  const [a, b] = [leased(redis.url, 'process-a'), leased(redis.url, 'process-b')]
  t.teardown(async () => { await a.close(); await b.close() })
  const lifts: Array<string | undefined> = []
  a.watchBanLifts?.((id) => lifts.push(id))
  await until('A subscribed', async () => (await redis.cli('PUBSUB', 'NUMSUB', BAN_LIFT_CHANNEL)).split('\n')[1] === '1', 2_000)
  const limits = { perMinute: 100_000, perDay: 1_000_000 }
  for (let i = 0; i < 60 && a.leases() === 0; i++) await a.consume('shared', limits, null)
  t.equal(a.leases(), 1, 'process A holds a lease')
  await b.reset('shared')
  t.ok(await poll(() => a.leases() === 0, 1_000, 5), 'the reset published through Redis ended it')
  t.ok(lifts.includes('shared'), 'and reached A\'s ban cache hook')
})

t.test('one process: counts from a lease are exact, request by request', async (t) => {
  const redis = await startRedis(t)
  const store = leased(redis.url, 'process-a')
  t.teardown(() => store.close())
  const limits = { perMinute: 100_000, perDay: 1_000_000 }
  const counts: number[] = []
  let fromLease = 0
  for (let i = 0; i < 300; i++) {
    if (store.leases() > 0) fromLease++
    counts.push((await store.consume('exact', limits, null)).minute.count)
  }
  t.ok(fromLease > 200, `most from a lease (${fromLease})`)
  t.same(counts, counts.map((_, i) => i + 1), 'the count (so X-RateLimit-Remaining) moves by exactly one per request')
})
