// docs/decisions.md §3: bans are cached in-process until they end, so a banned flood costs Redis nothing —
// also long after the old 5 s cache interval — and a lift made through one gateway reaches every
// other gateway at once (Redis pub/sub), standalone and Cluster.
import t, { type Test } from 'tap'
import { createBanCache } from '../../../src/gateway/limiter/ban-cache.js'
import type { StoreSettings } from '../../../src/gateway/limiter/create-store.js'
import { startBackend } from '../../helpers/backend.js'
import { startGateway, type StartedGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS, plansYaml, testConfig } from '../../helpers/config-fixture.js'
import { scriptCalls, startRedis, startRedisCluster } from '../../helpers/redis.js'
import { FIELD } from '../../../src/gateway/limiter/redis/layout.js'

const PLANS = plansYaml({ pro: { perMinute: 5, perDay: 10000 }, ban: { threshold: 3 } })
const ID = 'demo-pro'
/** How long B may take to learn of a lift: long for a message, nothing next to the 900 s its cached ban has left. */
const LIFT_DEADLINE_MS = 10_000

t.test('the cache itself: kept in this process\'s clock until the ban ends, forgotten on a lift', async (t) => {
  const clock = { now: 1_000_000 }
  const bans = createBanCache(() => clock.now, 2)
  const answer = (now: number, bannedUntil: number): Parameters<typeof bans.remember>[1] =>
    ({ outcome: 'key_banned', now, bannedUntil, minute: { count: 0, resetAt: 0, retryAt: 0 }, day: { count: 0, resetAt: 0, retryAt: 0 } })
  bans.remember('a', answer(5_000_000, 5_010_000)) // the store's clock is far ahead: only the 10 s left count
  t.equal(bans.get('a'), 1_010_000)
  bans.remember('b', answer(5_000_000, 0))
  t.equal(bans.get('b'), undefined, 'no ban in the answer: nothing cached')
  clock.now = 1_010_000
  t.equal(bans.get('a'), undefined, 'gone when it ends')
  bans.remember('a', answer(0, 5_000))
  bans.remember('c', answer(0, 5_000))
  bans.forget('a')
  t.equal(bans.get('a'), undefined, 'a lift forgets one')
  t.equal(bans.get('c'), 1_015_000)
  bans.forget(undefined)
  t.equal(bans.get('c'), undefined, 'a missed lift forgets all')
})

async function get (gw: StartedGateway): Promise<{ status: number, code: string | undefined }> {
  const res = await fetch(`${gw.url}/v1/pets?limit=1`, { headers: bearer(DEMO_KEYS.pro) })
  const body = await res.json() as { code?: string }
  return { status: res.status, code: body.code }
}

async function scenario (t: Test, settings: StoreSettings, cli: (...args: string[]) => Promise<string>): Promise<void> {
  const backend = await startBackend(t)
  const skew = { ms: 0 }
  const [a, b] = await Promise.all([
    startGateway(t, { backendUrl: backend.url, config: testConfig({ 'plans.yaml': PLANS }), limiter: { settings } }),
    startGateway(t, { backendUrl: backend.url, config: testConfig({ 'plans.yaml': PLANS }), limiter: { settings }, now: () => Date.now() + skew.ms })
  ])
  const earned: string[] = []
  for (let i = 0; i < 9; i++) earned.push((await get(a!)).code ?? 'ok')
  t.same(earned, ['ok', 'ok', 'ok', 'ok', 'ok', 'rate_limited', 'rate_limited', 'rate_limited', 'key_banned'], 'banned through A')
  t.same(await get(b!), { status: 429, code: 'key_banned' }, 'B learns the ban from Redis once')

  await cli('CONFIG', 'RESETSTAT')
  const flood = await Promise.all(Array.from({ length: 50 }, async () => await get(b!)))
  t.ok(flood.every((r) => r.status === 429 && r.code === 'key_banned'), '50 requests to B: all key_banned')
  skew.ms = 60_000
  t.same(await get(b!), { status: 429, code: 'key_banned' }, 'still cached a minute later (B\'s clock), far past the old 5 s')
  t.equal(await scriptCalls(cli), 0, '0 scripts for the banned flood')
  skew.ms = 0

  await cli('HDEL', `rl:{${ID}}`, FIELD.minuteNewest, FIELD.minuteUnits, FIELD.minuteOldest) // as if the minute window had drained, so a lifted key is admitted
  t.equal(await a!.app.limiter.liftBan(ID), true, 'lifted through A')
  const lifted = performance.now()
  let answer = await get(b!)
  while (answer.status !== 200 && performance.now() - lifted < LIFT_DEADLINE_MS) answer = await get(b!)
  const ms = performance.now() - lifted
  // B's cached ban has 900 s left by its clock: only the lift's message can end it this soon. How
  // soon is the machine's (tens of ms when quiet): printed, not asserted.
  t.equal(answer.status, 200, `B admits again, ${ms.toFixed(1)} ms after the lift (its cached ban had 900 s left)`)
  t.comment(`lift reached the other gateway in ${ms.toFixed(1)} ms`)
}

t.test('standalone Redis: the ban cache holds until the ban ends; a lift reaches every gateway', async (t) => {
  const redis = await startRedis(t)
  await scenario(t, { redisUrl: redis.url }, redis.cli)
})

t.test('Redis Cluster: the same through cluster pub/sub', async (t) => {
  const cluster = await startRedisCluster(t)
  const everyNode = async (...args: string[]): Promise<string> => {
    if (args[0] === 'INFO') {
      let calls = 0
      for (const port of cluster.ports) calls += await scriptCalls((...a) => cluster.cli(port, ...a))
      return `cmdstat_evalsha:calls=${calls}`
    }
    return (await Promise.all(cluster.ports.map(async (port) => await cluster.cli(port, '-c', ...args).catch(() => '')))).join('\n')
  }
  await scenario(t, { redisClusterNodes: cluster.nodes }, everyNode)
})
