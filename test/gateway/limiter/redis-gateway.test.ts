// Gateways sharing one real Redis (standalone, then a 3-master Cluster), as production builds them:
// a concurrent burst across two processes admits up to the limit and never over it, a script call
// decides many requests (INFO commandstats), NOSCRIPT recovery, a banned flood that costs Redis
// nothing, bans visible from every process, the pinned SHA of each Lua script, and readiness.
import t, { type Test } from 'tap'
import { IDLE_MS } from '../../../src/gateway/limiter/redis/calls.js'
import { SWEEP_MS } from '../../../src/gateway/limiter/redis/grants.js'
import { EPOCH, GRANT } from '../../../src/gateway/limiter/redis/scripts.js'
import type { StoreSettings } from '../../../src/gateway/limiter/create-store.js'
import { startBackend } from '../../helpers/backend.js'
import { burst, burstAnswers, limiterAdmitted, startGateway, type BurstAnswer, type StartedGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS } from '../../helpers/config-fixture.js'
import { until } from '../../helpers/poll.js'
import { startRedis, startRedisCluster } from '../../helpers/redis.js'

/** Changing a script changes its SHA: review the new script, then update the pin. */
const PINNED_SHAS = {
  grant: 'eebdd0bbc4e9c1b284cbcab0d510761560cc603a',
  epoch: '284dc9dc3d585ead4cdc8fabf40c553403b7b142'
}

t.test('each Lua script is pinned by its SHA, and the store calls it by that SHA', async (t) => {
  const redis = await startRedis(t)
  t.equal(await redis.cli('SCRIPT', 'LOAD', GRANT.lua), PINNED_SHAS.grant, 'Redis names grant.lua by its pinned SHA')
  t.equal(await redis.cli('SCRIPT', 'LOAD', EPOCH.lua), PINNED_SHAS.epoch, 'Redis names epoch.lua by its pinned SHA')
  await redis.cli('SCRIPT', 'FLUSH')
  const [gw] = await twoGateways(t, { redisUrl: redis.url })
  await (await fetch(`${gw!.url}/v1/pets`, { headers: bearer(DEMO_KEYS.pro) })).arrayBuffer()
  t.same((await redis.cli('SCRIPT', 'EXISTS', PINNED_SHAS.grant, PINNED_SHAS.epoch)).split('\n'), ['1', '1'], 'a request ran the pinned grant, a start the pinned epoch')
})

async function commandStats (cli: (...args: string[]) => Promise<string>): Promise<Record<string, number>> {
  const stats: Record<string, number> = {}
  for (const line of (await cli('INFO', 'commandstats')).split('\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim())
    if (match !== null) stats[match[1]!] = Number(match[2])
  }
  return stats
}

/** How many answers the limiter admitted were shed after it by the upstream gate (load, printed, never asserted). */
function shedNote (answers: BurstAnswer[]): string {
  const shed = answers.filter((answer) => answer.status !== 200 && limiterAdmitted(answer)).length
  return shed === 0 ? '' : ` (${shed} of them shed after the limiter by the upstream gate)`
}

async function twoGateways (t: Test, settings: StoreSettings): Promise<StartedGateway[]> {
  const backend = await startBackend(t)
  // The usage history's flush (every 5 s, off the hot path) would add its HINCRBYs to the hot path's commandstats.
  return await Promise.all([0, 1].map(() => startGateway(t, { backendUrl: backend.url, limiter: { settings }, history: { flushMs: 3_600_000 } })))
}

t.test('standalone Redis: two gateways, one limit', async (t) => {
  const redis = await startRedis(t)
  const gateways = await twoGateways(t, { redisUrl: redis.url })
  t.equal(gateways[0]!.app.limiter.store.describe().kind, 'redis')

  // What the limiter decided: a request it admitted may still be shed after it by the upstream gate when the
  // backend cannot take it in time (the machine's load), a 503 that is no refusal of the limiter's.
  const answers = await burstAnswers(gateways, DEMO_KEYS.pro, 400)
  const admitted = answers.filter(limiterAdmitted).length
  t.ok(admitted <= 300, `400 concurrent requests for a 300/min key across two processes: ${admitted} admitted, never over${shedNote(answers)}`)
  t.ok(admitted >= 294, `and at least 294 (${admitted})`)
  t.equal(answers.filter((answer) => answer.status === 429).length, 400 - admitted, 'every other one 429')

  await redis.cli('CONFIG', 'RESETSTAT')
  const n = 200
  const roomy = await burstAnswers(gateways, DEMO_KEYS.business, n)
  const refused = roomy.filter((answer) => !limiterAdmitted(answer)).map((answer) => `${answer.status} ${answer.code ?? ''} ${answer.message ?? ''}`)
  const warnings = gateways.flatMap((gateway) => gateway.logs.filter((line) => Number(line.level) >= 40).map((line) => `${String(line.msg)} ${JSON.stringify(line.err ?? '')}`))
  t.same(refused, [], `${n} concurrent requests of a roomy key all admitted by the limiter${shedNote(roomy)}${refused.length > 0 ? `; logged: ${warnings.slice(-5).join(' | ')}` : ''}`)
  t.ok(roomy.some((answer) => answer.status === 200), 'and served')
  const stats = await commandStats(redis.cli)
  // A script's first call on a connection is an EVAL (ioredis sends its source once), the next ones EVALSHA.
  const { evalsha = 0, eval: evals = 0, info: _info, 'config|resetstat': _reset, ...internal } = stats
  const calls = evalsha + evals
  t.ok(calls >= 1 && calls <= n / 2, `${calls} script calls decided ${n} concurrent requests`)
  // zremrangebyscore, zrangebyscore: the bans gauge's background count (ban-count.ts, admin.ts listBans) after the
  // pro burst's ban, off the request path (on a loaded machine it may land on either side of the RESETSTAT).
  const outsideScript = Object.keys(internal).filter((c) => !['hmget', 'hget', 'hset', 'pexpireat', 'time', 'zremrangebyscore', 'zrangebyscore'].includes(c))
  t.same(outsideScript, [], 'no other command reaches Redis on the hot path')
  t.comment(`script calls per request: ${(calls / n).toFixed(3)}; commandstats after ${n} requests: ${JSON.stringify(stats)}`)

  await redis.cli('SCRIPT', 'FLUSH')
  const res = await fetch(`${gateways[0]!.url}/v1/pets`, { headers: bearer(DEMO_KEYS.business) })
  t.equal(res.status, 200, 'NOSCRIPT after SCRIPT FLUSH: reloaded transparently')
  await res.arrayBuffer()

  t.same((await gateways[1]!.app.limiter.listBans()).map((b) => b.id), ['demo-pro'], 'the pro flood earned a ban, visible from every process')
  for (const gw of gateways) await (await fetch(`${gw.url}/v1/pets`, { headers: bearer(DEMO_KEYS.pro) })).arrayBuffer()
  // Each process's housekeeping first (an expired pool given back, an idle reserve handed back: at
  // most IDLE_MS + a sweep), so what is measured is the flood's own cost.
  await new Promise((resolve) => setTimeout(resolve, IDLE_MS + SWEEP_MS + 500))
  await redis.cli('CONFIG', 'RESETSTAT')
  const banned = await burst(gateways, DEMO_KEYS.pro, 100)
  t.same(new Set(banned), new Set([429]))
  const after = await commandStats(redis.cli)
  t.equal((after.evalsha ?? 0) + (after.eval ?? 0), 0, `a banned flood costs Redis nothing (${JSON.stringify(after)})`)

  t.equal(await gateways[0]!.app.limiter.liftBan('demo-pro'), true)
  t.same(await gateways[1]!.app.limiter.listBans(), [])
  t.ok(await until('the lift counted', () => gateways[0]!.app.limiterStatus.bannedKeys() === 0), 'the ban count follows the lift')
})

t.test('Redis Cluster: two gateways, one limit', async (t) => {
  const cluster = await startRedisCluster(t)
  const gateways = await twoGateways(t, { redisClusterNodes: cluster.nodes })
  t.equal(gateways[0]!.app.limiter.store.describe().kind, 'cluster')
  const answers = await burstAnswers(gateways, DEMO_KEYS.pro, 400)
  const admitted = answers.filter(limiterAdmitted).length
  t.ok(admitted <= 300 && admitted >= 294, `${admitted} of 400 admitted for a 300/min key${shedNote(answers)}`)
  t.same((await gateways[1]!.app.limiter.listBans()).map((b) => b.id), ['demo-pro'], 'the ban is listed from the bans index')
  const ready = await fetch(`${gateways[0]!.adminUrl}/readyz`)
  t.equal(ready.status, 200)
  t.same((await ready.json() as { checks: Record<string, unknown> }).checks.store,
    { ok: true, kind: 'cluster', nodes: cluster.nodes, state: 'ok' }, 'readiness names the store and its seeds')
})
