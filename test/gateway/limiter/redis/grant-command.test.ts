// The grant call as grant-command.ts sends it, on a real redis-server and a real Cluster: what ioredis's
// defineCommand did and the store relies on — the script's source on a connection's first call (EVAL), its SHA
// after (EVALSHA), the source again once Redis has lost it (SCRIPT FLUSH: NOSCRIPT), a Cluster's calls on the
// slot's master — and the reply read as the port's readers expect it: integers, one reply per entry.
import { Cluster, Redis } from 'ioredis'
import t from 'tap'
import { grantSender } from '../../../../src/gateway/limiter/redis/grant-command.js'
import { grantArgs, grantKeys, readGrantReply, type GrantEntry } from '../../../../src/gateway/limiter/redis/scripts.js'
import { startRedis, startRedisCluster } from '../../../helpers/redis.js'

const BAN = { threshold: 30, windowSeconds: 60, durationSeconds: 900, maxDurationSeconds: 86400 }

function entry (id: string, requests: number): GrantEntry {
  return { key: `rl:{${id}}`, minuteLimit: 5, dayLimit: 1_000, monthLimit: 0, monthSoft: false, requests, cost: 1, extra: 0, reserve: 0, write: true, ban: BAN, adjustments: [], blocksBucket: -1, blocks: 0 }
}

/** Calls of `name` so far (INFO commandstats), 0 when none. */
async function calls (cli: (...args: string[]) => Promise<string>, name: string): Promise<number> {
  return Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(await cli('INFO', 'commandstats'))?.[1] ?? 0)
}

t.test('EVAL first on a connection, EVALSHA after, the source again after SCRIPT FLUSH; integer replies', async (t) => {
  const redis = await startRedis(t)
  const client = new Redis(redis.url)
  t.teardown(() => { client.disconnect() })
  const send = grantSender(client)
  const call = async (entries: GrantEntry[]): Promise<ReturnType<typeof readGrantReply>> => readGrantReply(await send(grantKeys(entries), grantArgs('test', entries)), entries.length)

  const first = await call([entry('a', 3), entry('b', 7)])
  t.equal(await calls(redis.cli, 'eval'), 1, 'the first call on the connection carries the source')
  t.equal(await calls(redis.cli, 'evalsha'), 0, 'and no SHA before it')
  t.same(first.replies.map((reply) => [reply.outcome, reply.admitted]), [['ok', 3], ['rate_limited', 5]], 'one reply per entry, in order: 3 of 3, then 5 of 7 within the limit of 5')
  t.equal(typeof first.now, 'number', 'Redis time is a number')
  t.ok(first.replies.every((reply) => typeof reply.minute.used === 'number' && typeof reply.pooled === 'number'), 'fields are numbers, not strings')

  const second = await call([entry('a', 1)])
  t.equal(second.replies[0]?.minute.used, 4, 'the same id counted on: 4 of 5')
  t.equal(await calls(redis.cli, 'evalsha'), 1, 'later calls carry the SHA')
  t.equal(await calls(redis.cli, 'eval'), 1, 'and not the source again')

  await redis.cli('SCRIPT', 'FLUSH')
  const third = await call([entry('a', 2)])
  t.same(third.replies.map((reply) => [reply.outcome, reply.admitted]), [['rate_limited', 1]], 'after SCRIPT FLUSH the call is answered: 1 of 2 within the limit')
  t.equal(await calls(redis.cli, 'eval'), 2, 'the source sent again after NOSCRIPT')
  await call([entry('c', 1)])
  t.equal(await calls(redis.cli, 'evalsha'), 3, 'then the SHA again (the refused one and this one)')
  t.equal(await calls(redis.cli, 'eval'), 2, 'no third source')
})

t.test('on a Cluster each call goes to its slot\'s master, the source once per connection', async (t) => {
  const cluster = await startRedisCluster(t)
  const client = new Cluster(cluster.nodes.map((node) => { const [host, port] = node.split(':'); return { host: host!, port: Number(port) } }))
  t.teardown(() => { client.disconnect() })
  const send = grantSender(client)
  const ids = ['alpha', 'omega', 'middle', 'zeta']
  for (const id of ids) {
    const entries = [entry(id, 2)]
    const { replies } = readGrantReply(await send(grantKeys(entries), grantArgs('test', entries)), 1)
    t.same([replies[0]?.outcome, replies[0]?.admitted, replies[0]?.minute.used], ['ok', 2, 2], `${id}: counted`)
  }
  const perNode = await Promise.all(cluster.ports.map(async (port) => ({ eval: await calls((...args) => cluster.cli(port, ...args), 'eval'), evalsha: await calls((...args) => cluster.cli(port, ...args), 'evalsha') })))
  const reached = perNode.filter((node) => node.eval + node.evalsha > 0)
  t.equal(perNode.reduce((sum, node) => sum + node.eval + node.evalsha, 0), ids.length, 'one script call per call, on the masters together')
  t.ok(reached.length >= 2, `the ids' slots spread the calls over masters (${reached.length} reached)`)
  t.ok(reached.every((node) => node.eval === 1), 'each master reached got the source once, on its connection\'s first call')
})
