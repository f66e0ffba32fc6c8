// Gateways sharing one real Redis (standalone, then a 3-master Cluster): exact admission under a
// concurrent burst across processes (leases off: every decision in Redis; leases on: never more
// than the limit), at most one script call per request without leases (INFO commandstats), NOSCRIPT
// recovery, a banned flood that costs Redis nothing, the pinned SHA of each Lua script, and the
// store's readiness report.
import t, { type Test } from 'tap'
import { Redis } from 'ioredis'
import { SCRIPTS } from '../../../src/gateway/limiter/stores/redis-scripts.js'
import { createRedisRecovery } from '../../../src/gateway/limiter/stores/redis-recovery.js'
import { createRedisStore, REDIS_BATCH_MAX } from '../../../src/gateway/limiter/stores/redis.js'
import type { StoreSettings } from '../../../src/gateway/limiter/create-store.js'
import { startBackend } from '../../helpers/backend.js'
import { bearer, burst, DEMO_KEYS, startGateway, type StartedGateway } from '../../helpers/gateway.js'
import { until } from '../../helpers/poll.js'
import { startRedis, startRedisCluster } from '../../helpers/redis.js'

/** Changing a script (or a shared file it starts with) changes its SHA: review the new script, then update the pin. */
const PINNED_SHAS: Record<keyof typeof SCRIPTS, string> = {
  decide: '73a07cd0d805969e426bf72d2b74c3f62b2460d1',
  decideBatch: '956933f8308eb46027be007f0d873aed3b897b59',
  peek: 'f5574bce5903b95184496abff4cf4fdf67ba2b68',
  lease: '5c09a4beaa8252a04da1680c0c6c507ef8044dda',
  giveBack: 'f42239177d5e50504a445179bc7d16e3086c3af2',
  writeBack: 'c93139da00ed27c2e3111cfee58396eafbfa14e1',
  reseed: 'ef19b56ffc7629d88447164a4c42449d9413dcd2',
  heartbeat: '3dc6049bfd201c4a67d50fd60348085f40cde477',
  epoch: '7e54a63b7201b18d45c210e6efeb98e7cb9e1c4d'
}

t.test('each Lua script is pinned by its SHA, and the store calls it by that SHA', async (t) => {
  const redis = await startRedis(t)
  for (const [name, script] of Object.entries(SCRIPTS)) {
    t.equal(await redis.cli('SCRIPT', 'LOAD', script.lua), PINNED_SHAS[name as keyof typeof SCRIPTS], `Redis names ${name} by its pinned SHA`)
  }
  await redis.cli('SCRIPT', 'FLUSH')
  const [gw] = await twoGateways(t, { redisUrl: redis.url })
  await (await fetch(`${gw!.url}/v1/pets`, { headers: bearer(DEMO_KEYS.pro) })).arrayBuffer()
  t.equal(await redis.cli('SCRIPT', 'EXISTS', PINNED_SHAS.decide), '1', 'the script a request ran is the pinned decide')

  const store = createRedisStore(new Redis(redis.url), { batchMax: REDIS_BATCH_MAX })
  t.teardown(() => store.close())
  const limits = { perMinute: 100, perDay: 1000 }
  await store.peek('pinned', limits)
  const { result } = await store.lease('pinned', limits, null, 5, 'holder', undefined)
  await store.giveBack('pinned', { minuteBucket: Math.floor(result.now / 1000), dayBucket: Math.floor(result.now / 900_000), count: 4 })
  t.equal((await store.peek('pinned', limits)).minute.count, 1, 'the lease of 5 was counted, 4 of it handed back')
  await Promise.all(['pinned-a', 'pinned-b'].map(async (id) => await store.consume(id, limits, null)))
  const exists = await redis.cli('SCRIPT', 'EXISTS', PINNED_SHAS.peek, PINNED_SHAS.lease, PINNED_SHAS.giveBack, PINNED_SHAS.decideBatch)
  t.same(exists.split('\n'), ['1', '1', '1', '1'], 'peek, lease, give back and decide batch (two decisions of one turn) ran by their pinned SHAs')

  const recoveryClient = new Redis(redis.url)
  t.teardown(() => { recoveryClient.disconnect() })
  const recovery = createRedisRecovery(recoveryClient)
  const epoch = await recovery.epoch('', 'first')
  t.same(await recovery.epoch('', 'second'), epoch, 'the epoch marker is made once')
  t.equal(await recovery.heartbeat('holder', 10_000), 1 + 2, 'this holder and the two gateways above')
  await recovery.writeBack('pinned', 'holder', 1, [{ minute: Math.floor(result.now / 1000), day: Math.floor(result.now / 900_000), count: 2 }])
  await recovery.reseed('pinned', { minuteBucket: Math.floor(result.now / 1000), minute: 2, dayBucket: Math.floor(result.now / 900_000), day: 2, bannedUntil: 0 })
  t.equal((await store.peek('pinned', limits)).minute.count, 5, '1 counted, 2 written back, a re-seed floor of 2 on top (what was lost adds to what came after)')
  const recoveryScripts = await redis.cli('SCRIPT', 'EXISTS', PINNED_SHAS.writeBack, PINNED_SHAS.reseed, PINNED_SHAS.heartbeat, PINNED_SHAS.epoch)
  t.same(recoveryScripts.split('\n'), ['1', '1', '1', '1'], 'write-back, re-seed, heartbeat and epoch ran by their pinned SHAs')
})

async function commandStats (cli: (...args: string[]) => Promise<string>): Promise<Record<string, number>> {
  const stats: Record<string, number> = {}
  for (const line of (await cli('INFO', 'commandstats')).split('\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim())
    if (match !== null) stats[match[1]!] = Number(match[2])
  }
  return stats
}

async function twoGateways (t: Test, settings: StoreSettings): Promise<StartedGateway[]> {
  const backend = await startBackend(t)
  // The usage history's flush (every 5 s, off the hot path) would add its HINCRBYs to the hot path's commandstats.
  return await Promise.all([0, 1].map(() => startGateway(t, { backendUrl: backend.url, limiter: { settings }, history: { flushMs: 3_600_000 } })))
}

t.test('standalone Redis, leases on: a burst across two gateways never exceeds the limit', async (t) => {
  const redis = await startRedis(t)
  const gateways = await twoGateways(t, { redisUrl: redis.url })
  const statuses = await burst(gateways, DEMO_KEYS.pro, 400)
  const admitted = statuses.filter((s) => s === 200).length
  t.ok(admitted <= 300 && admitted >= 290, `400 concurrent requests for a 300/min key: ${admitted} admitted`)
  t.equal(statuses.length - admitted, statuses.filter((s) => s === 429).length, 'the rest 429')
})

t.test('standalone Redis, leases off: two gateways, one limit', async (t) => {
  const redis = await startRedis(t)
  const gateways = await twoGateways(t, { redisUrl: redis.url, storeLeases: false })
  t.equal(gateways[0]!.app.limiter.store.kind, 'redis')

  await redis.cli('CONFIG', 'RESETSTAT')
  const statuses = await burst(gateways, DEMO_KEYS.pro, 400)
  t.equal(statuses.filter((s) => s === 200).length, 300, '400 concurrent requests for a 300/min key: exactly 300 admitted')
  t.equal(statuses.filter((s) => s === 429).length, 100)

  await redis.cli('CONFIG', 'RESETSTAT')
  const n = 200
  const started = performance.now()
  t.same(new Set(await burst(gateways, DEMO_KEYS.business, n)), new Set([200]))
  const stats = await commandStats(redis.cli)
  const seconds = (performance.now() - started) / 1000
  // Each process's registry heartbeat (once a second, not per request) is one script doing ZADD,
  // ZREMRANGEBYSCORE, PEXPIRE and ZCARD, and its epoch check one doing a GET; decisions do neither.
  const { evalsha = 0, eval: evals = 0, info: _info, 'config|resetstat': _reset, zadd = 0, get = 0, zremrangebyscore: _z, zcard: _c, ...internal } = stats
  t.ok(zadd <= 2 * (Math.ceil(seconds) + 1), `${zadd} heartbeats in ${seconds.toFixed(1)} s from 2 processes: per second, not per request`)
  // At most one script call per request (fewer with batching on: decide batch). A script's
  // first call on a connection is an EVAL (ioredis sends its source once), the next ones EVALSHA.
  const decisionCalls = evalsha + evals - zadd - get
  t.ok(decisionCalls >= 1 && decisionCalls <= n, `${decisionCalls} script calls decided ${n} requests`)
  const outsideScript = Object.keys(internal).filter((c) => !['hmget', 'hget', 'hset', 'hdel', 'del', 'pexpire', 'pttl', 'time'].includes(c))
  t.same(outsideScript, [], 'no other command reaches Redis on the hot path')
  t.comment(`Redis script calls per request: ${(evalsha + evals) / n}, decisions per script call ${(n / decisionCalls).toFixed(2)} (commandstats after ${n} requests: ${JSON.stringify(stats)})`)

  await redis.cli('SCRIPT', 'FLUSH')
  const res = await fetch(`${gateways[0]!.url}/v1/pets`, { headers: bearer(DEMO_KEYS.business) })
  t.equal(res.status, 200, 'NOSCRIPT after SCRIPT FLUSH: reloaded transparently')
  await res.arrayBuffer()

  t.same((await gateways[1]!.app.limiter.listBans()).map((b) => b.id), ['demo-pro'], 'the pro flood earned a ban, visible from every process')
  for (const gw of gateways) await (await fetch(`${gw.url}/v1/pets`, { headers: bearer(DEMO_KEYS.pro) })).arrayBuffer()
  await redis.cli('CONFIG', 'RESETSTAT')
  const banned = await burst(gateways, DEMO_KEYS.pro, 100)
  t.same(new Set(banned), new Set([429]))
  const after = await commandStats(redis.cli)
  // Every decision script reads the consumer's ring (HMGET); each process's once-a-second registry
  // heartbeat and epoch check, which may fall in the flood (after the SCRIPT FLUSH above, as a
  // NOSCRIPT EVALSHA and an EVAL), never do.
  t.equal(after.hmget ?? 0, 0, `a banned flood costs Redis no decision (${JSON.stringify(after)})`)

  t.equal(await gateways[0]!.app.limiter.liftBan('demo-pro'), true)
  t.same(await gateways[1]!.app.limiter.listBans(), [])
  await redis.cli('PING')
  t.ok(await until('the lift counted', () => gateways[0]!.app.limiterStatus.bannedKeys() === 0, 2_000), 'the ban count follows the lift')
})

t.test('Redis Cluster: two gateways, one limit', async (t) => {
  const cluster = await startRedisCluster(t)
  const gateways = await twoGateways(t, { redisClusterNodes: cluster.nodes })
  t.equal(gateways[0]!.app.limiter.store.kind, 'cluster')
  const statuses = await burst(gateways, DEMO_KEYS.pro, 400)
  t.equal(statuses.filter((s) => s === 200).length, 300, 'exactly 300 admitted')
  t.same((await gateways[1]!.app.limiter.listBans()).map((b) => b.id), ['demo-pro'], 'bans listed by scanning every master')
  const ready = await fetch(`${gateways[0]!.adminUrl}/readyz`)
  t.equal(ready.status, 200)
  t.same((await ready.json() as { checks: Record<string, unknown> }).checks.store,
    { ok: true, kind: 'cluster', nodes: cluster.nodes, state: 'ok' }, 'readiness names the store and its seeds')
})
