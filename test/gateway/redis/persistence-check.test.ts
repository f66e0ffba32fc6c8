// The gateway says when what it bills would not survive a Redis restart: month quotas (or a soft
// quota's overage) on a Redis started with `--save '' --appendonly no` → a warning in the log at
// start and in /readyz (readiness stays 200); the shipped settings (AOF, everysec) → no warning; a
// config without perMonth → none, until a reload gives a plan one; a Redis whose CONFIG is renamed →
// unknown, said once, never guessed; through Sentinel → its master read; a Cluster → every master read.
import { cpSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import Fastify from 'fastify'
import { pino } from 'pino'
import { Writable } from 'node:stream'
import t from 'tap'
import { configPlugin, createConfigHolder } from '../../../src/gateway/config/plugin.js'
import { persistenceCheckPlugin } from '../../../src/gateway/redis/persistence-check.js'
import { ReadinessRegistry } from '../../../src/gateway/runtime/readiness.js'
import { persistenceMode, persistenceNeeds } from '../../../src/gateway/redis/persistence.js'
import { startGateway, type StartedGateway } from '../../helpers/gateway.js'
import { FIXTURE_CONFIG_DIR, testConfig } from '../../helpers/config-fixture.js'
import { COST_ROUTES, METERED_PLANS } from '../../helpers/quota.js'
import { EVENT_TIMEOUT_MS, poll, sleep } from '../../helpers/poll.js'
import { startRedis, startRedisCluster, startRedisSentinel } from '../../helpers/redis.js'

const WARNING = /keeps nothing across a restart.*month quotas \(perMonth\).*appendonly yes/
const AOF = ['--appendonly', 'yes', '--appendfsync', 'everysec']

interface Ready { status: string, checks: Record<string, Record<string, unknown>> }

async function ready (gw: StartedGateway): Promise<{ status: number, body: Ready }> {
  const res = await fetch(`${gw.adminUrl}/readyz`)
  return { status: res.status, body: await res.json() as Ready }
}

const warnings = (gw: StartedGateway): string[] => gw.logs.filter((l) => l.level === 40 && WARNING.test(String(l.msg))).map((l) => String(l.msg))

t.test('what needs persistence, and what a node keeps', async (t) => {
  t.same(persistenceNeeds(testConfig()), [], 'the fixture plans: minute and day only')
  t.same(persistenceNeeds(testConfig({ 'plans.yaml': METERED_PLANS })), ['month quotas (perMonth)', 'overage (overage: allow)'])
  t.same([persistenceMode('yes', ''), persistenceMode('no', '3600 1'), persistenceMode('no', ''), persistenceMode('no', ' ')], ['aof', 'rdb', 'none', 'none'])
})

t.test('month quotas on a Redis that keeps nothing: a warning at start and in /readyz, still ready', async (t) => {
  const redis = await startRedis(t) // the test helper's Redis: --save '' --appendonly no
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': METERED_PLANS }), limiter: { settings: { redisUrl: redis.url } } })
  const logged = warnings(gw)
  t.comment(`log: ${logged.join(' | ')}`)
  t.equal(logged.length, 1, 'one warning line at start')
  t.match(logged[0], /overage \(overage: allow\)/, 'naming the overage too')
  const { status, body } = await ready(gw)
  t.comment(`/readyz persistence: ${JSON.stringify(body.checks.persistence)}`)
  t.equal(status, 200, 'readiness does not fail over it')
  t.match(body.checks.persistence, { ok: true, redis: { [`127.0.0.1:${redis.port}`]: 'none' }, warning: WARNING })
  await ready(gw)
  t.equal(warnings(gw).length, 1, 'said once, not at every probe')
})

t.test('the shipped settings (AOF, everysec): no warning', async (t) => {
  const redis = await startRedis(t, AOF)
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': METERED_PLANS }), limiter: { settings: { redisUrl: redis.url } } })
  const { status, body } = await ready(gw)
  t.comment(`/readyz persistence: ${JSON.stringify(body.checks.persistence)}`)
  t.equal(status, 200)
  t.same(body.checks.persistence, { ok: true, needs: ['month quotas (perMonth)', 'overage (overage: allow)'], redis: { [`127.0.0.1:${redis.port}`]: 'aof everysec' } })
  t.same(warnings(gw), [])
})

t.test('no perMonth: no warning; a reload that gives a plan perMonth brings it, one that takes it away clears it', async (t) => {
  const redis = await startRedis(t)
  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  const gw = await startGateway(t, { reload: { dir, watch: false }, limiter: { settings: { redisUrl: redis.url } } })
  t.same(warnings(gw), [], 'minute and day limits only: nothing billed by the month')
  t.notOk((await ready(gw)).body.checks.persistence?.warning)

  const plans = readFileSync(join(dir, 'plans.yaml'), 'utf8')
  writeFileSync(join(dir, 'plans.yaml'), METERED_PLANS)
  t.match(await gw.app.configReloader.reload('test'), { ok: true, changed: true })
  const after = await ready(gw)
  t.equal(after.status, 200)
  t.match(after.body.checks.persistence, { ok: true, warning: WARNING }, 'the reload\'s perMonth is judged at the next probe')
  t.equal(warnings(gw).length, 1, 'and logged')

  writeFileSync(join(dir, 'plans.yaml'), plans)
  t.match(await gw.app.configReloader.reload('test'), { ok: true, changed: true })
  t.notOk((await ready(gw)).body.checks.persistence?.warning, 'cleared with the last perMonth')
  t.ok(gw.logs.some((l) => l.msg === 'Redis persistence: the earlier warning no longer applies'), 'and the log says so')
})

t.test('a Redis outage neither clears nor repeats the warning', async (t) => {
  const redis = await startRedis(t)
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': METERED_PLANS }), limiter: { settings: { redisUrl: redis.url } } })
  // The reading the outage must keep: taken at start, or (a start-up reading past its 500 ms bound
  // on a loaded machine) at a probe while Redis is up, never assumed.
  t.ok(await poll(async () => (await ready(gw)).body.checks.persistence?.warning !== undefined, EVENT_TIMEOUT_MS, 50), 'the warning is in force before the outage')
  await redis.stop()
  for (let i = 0; i < 3; i++) t.match((await ready(gw)).body.checks.persistence, { ok: true, redis: { [`127.0.0.1:${redis.port}`]: 'none' }, warning: WARNING }, `probe ${i + 1} with Redis down: the last reading`)
  await redis.start()
  t.match((await ready(gw)).body.checks.persistence, { warning: WARNING })
  t.equal(warnings(gw).length, 1, 'one warning line in all')
  t.notOk(gw.logs.some((l) => l.msg === 'Redis persistence: the earlier warning no longer applies'), 'never said to be cleared')
})

t.test('without a probe: a new config is judged on the timer, and Redis read again for it', async (t) => {
  const redis = await startRedis(t)
  const lines: Array<Record<string, unknown>> = []
  const log = pino(new Writable({ write (chunk: Buffer, _enc, cb) { for (const l of chunk.toString().split('\n')) if (l !== '') lines.push(JSON.parse(l) as Record<string, unknown>); cb() } }))
  const holder = createConfigHolder(testConfig())
  const app = Fastify({ loggerInstance: log })
  t.teardown(async () => { await app.close() })
  await app.register(configPlugin, { holder })
  await app.register(persistenceCheckPlugin, { settings: { redisUrl: redis.url }, readiness: new ReadinessRegistry(), recheckMs: 100 })
  await app.ready()
  const warned = (): number => lines.filter((l) => l.level === 40 && WARNING.test(String(l.msg))).length
  t.equal(warned(), 0, 'no perMonth: nothing to warn about')
  holder.swap(testConfig({ 'plans.yaml': METERED_PLANS })) // what a reload does
  t.ok(await poll(async () => warned() === 1, 3_000, 50), 'a plan gains perMonth: warned within a recheck')

  // Redis given RDB snapshots (it keeps something now). Not `appendonly yes`: a Redis still writing its
  // first AOF refuses SIGTERM ("Writing initial AOF, can't exit"), and the teardown would wait for it.
  // Only once Redis has answered the read for the new config (three CONFIG GETs: none before, as no plan needed it),
  // or a loaded machine's read for the new config could see the change and clear the warning itself.
  const configCalls = async (): Promise<number> => Number(/cmdstat_config\|get:calls=(\d+)/.exec(await redis.cli('INFO', 'commandstats'))?.[1] ?? 0)
  t.ok(await poll(async () => await configCalls() >= 3, EVENT_TIMEOUT_MS, 50), 'Redis read for the new config')
  await redis.cli('CONFIG', 'SET', 'save', '3600 1')
  await sleep(500)
  t.notOk(lines.some((l) => l.msg === 'Redis persistence: the earlier warning no longer applies'), 'Redis is not polled on the timer')
  holder.swap(testConfig({ 'plans.yaml': METERED_PLANS, 'routes.yaml': COST_ROUTES })) // the next reload
  t.ok(await poll(async () => lines.some((l) => l.msg === 'Redis persistence: the earlier warning no longer applies'), 3_000, 50), 'read again for the new config: cleared')
  t.equal(warned(), 1)
})

for (const [how, args, acl] of [['renamed away', ['--rename-command', 'CONFIG', ''], false], ['denied by ACL', [], true]] as const) {
  t.test(`CONFIG ${how} (managed Redis): persistence unknown, said once, no guess`, async (t) => {
    const redis = await startRedis(t, [...args])
    if (acl) await redis.cli('ACL', 'SETUSER', 'default', '-config')
    const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': METERED_PLANS }), limiter: { settings: { redisUrl: redis.url } } })
    const { status, body } = await ready(gw)
    t.comment(`/readyz persistence: ${JSON.stringify(body.checks.persistence)}`)
    t.equal(status, 200)
    t.match(body.checks.persistence, { ok: true, redis: { [`127.0.0.1:${redis.port}`]: acl ? /^unknown: NOPERM/ : /^unknown: ERR unknown command/ } })
    t.notOk(body.checks.persistence?.warning, 'no warning it cannot back')
    t.equal(gw.logs.filter((l) => String(l.msg).startsWith('Redis persistence cannot be read')).length, 1, 'an info line says it could not be read')
  })
}

t.test('through Sentinel: the master it names is read, and named by its own address', async (t) => {
  const master = await startRedis(t)
  const sentinel = await startRedisSentinel(t, master)
  const gw = await startGateway(t, {
    config: testConfig({ 'plans.yaml': METERED_PLANS }),
    limiter: { settings: { redisSentinels: [`127.0.0.1:${sentinel.port}`], redisSentinelName: sentinel.masterName } }
  })
  const { body } = await ready(gw)
  t.comment(`/readyz persistence: ${JSON.stringify(body.checks.persistence)}`)
  t.same(body.checks.persistence?.redis, { [`127.0.0.1:${master.port}`]: 'none' }, 'the master, not the sentinel')
  t.match(body.checks.persistence?.warning, WARNING)
})

t.test('a Cluster: every master is read, each one named', async (t) => {
  const cluster = await startRedisCluster(t)
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': METERED_PLANS }), limiter: { settings: { redisClusterNodes: cluster.nodes } } })
  const { body } = await ready(gw)
  t.comment(`/readyz persistence: ${JSON.stringify(body.checks.persistence)}`)
  t.same(Object.keys(body.checks.persistence?.redis as Record<string, string>).sort(), cluster.nodes.slice().sort(), 'the three masters')
  t.match(body.checks.persistence?.warning, WARNING)
  for (const node of cluster.nodes) t.match(body.checks.persistence?.warning, node, `names ${node}`)
  t.equal(warnings(gw).length, 1, 'one line at start')
})
