// The batched decision path decides exactly as the single one: the same sequence of decisions —
// several consumers with their own limits and ban policies, repeats inside one batch, minute and
// day window edges, bans starting, escalating and ending — driven through decide-batch (the Redis
// store's batch of one turn) and through decide (one call per decision), reply by reply. On the Lua
// VM's virtual clock the replies are identical to the millisecond. On real Redis (standalone, and a
// 3-master Cluster, where a batch carries one slot's decisions) both run on Redis TIME in the same
// turn, on twin servers (or twin key names): outcomes and counts are identical; instants derived
// from `now` may differ by the two calls' own time difference, and nothing else may.
import { Cluster, Redis } from 'ioredis'
import t, { type Test } from 'tap'
import type { BanPolicy, Limits } from '../../../src/gateway/config/types.js'
import { DAY_WINDOW, MINUTE_WINDOW } from '../../../src/gateway/limiter/arithmetic.js'
import type { ConsumeResult, LimiterStore } from '../../../src/gateway/limiter/store.js'
import { banArg, redisKeys, SCRIPTS } from '../../../src/gateway/limiter/stores/redis-scripts.js'
import { createRedisStore, REDIS_BATCH_MAX } from '../../../src/gateway/limiter/stores/redis.js'
import { createLuaRedis, LUA_EPOCH_MS } from '../../helpers/lua-redis.js'
import { sleep } from '../../helpers/poll.js'
import { decisionScriptCalls, startRedis, startRedisCluster } from '../../helpers/redis.js'

const BAN: BanPolicy = { threshold: 2, windowSeconds: 60, durationSeconds: 1, maxDurationSeconds: 4 }

interface Consumer { readonly name: string, readonly limits: Limits, readonly ban: BanPolicy | null }
const CONSUMERS: readonly Consumer[] = [
  { name: 'a', limits: { perMinute: 6, perDay: 1_000 }, ban: BAN },
  { name: 'b', limits: { perMinute: 4, perDay: 1_000 }, ban: BAN },
  { name: 'c', limits: { perMinute: 1_000, perDay: 9 }, ban: null },
  { name: 'd', limits: { perMinute: 3, perDay: 1_000 }, ban: null },
  { name: 'e', limits: { perMinute: 100_000, perDay: 1_000_000 }, ban: BAN }
]
/** Consumers whose minute ring starts with admissions 59 s old: the window's edge passes during the run. */
const PLANTED = ['a', 'd']

/** Between two steps: the next turn, a short pause, or the next second (a new minute bucket). */
type Gap = 'turn' | 'pause' | 'second' | 'minute' | 'day'
interface Step { readonly batch: readonly Consumer[], readonly gap: Gap }

function prng (seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s * 1_664_525 + 1_013_904_223) >>> 0
    return s / 4_294_967_296
  }
}

/** A deterministic sequence: batches of 1–10 decisions (consumers repeat), `long` gaps allowed only on a virtual clock. */
function sequence (steps: number, seed: number, long: boolean): Step[] {
  const random = prng(seed)
  return Array.from({ length: steps }, () => {
    const size = 1 + Math.floor(random() * 10)
    const batch = Array.from({ length: size }, () => CONSUMERS[Math.floor(random() * CONSUMERS.length)]!)
    const r = random()
    const gap: Gap = long && r > 0.95 ? 'day' : long && r > 0.85 ? 'minute' : r > 0.8 ? 'second' : r > 0.55 ? 'pause' : 'turn'
    return { batch, gap }
  })
}

t.test('Lua VM, virtual clock: decide-batch replies are decide\'s, to the millisecond', async (t) => {
  const clock = { now: LUA_EPOCH_MS + 5 * DAY_WINDOW.bucketMs + 58_400 }
  const single = createLuaRedis(() => clock.now)
  const batched = createLuaRedis(() => clock.now)
  const random = prng(7)
  let decisions = 0
  let admitted = 0
  const outcomes = new Set<number>()
  for (const { batch, gap } of sequence(400, 11, true)) {
    const keys = batch.map((c) => redisKeys(c.name))
    const args = batch.map((c) => [c.limits.perMinute, c.limits.perDay, banArg(c.ban)])
    const one = keys.map((k, i) => single.run(SCRIPTS.decide, k, args[i]!) as number[])
    const many = batched.run(SCRIPTS.decideBatch, keys.flat(), args.flat()) as number[][]
    t.same(many, one, `${batch.map((c) => c.name).join('')} at ${clock.now - LUA_EPOCH_MS}`)
    decisions += batch.length
    for (const reply of one) {
      outcomes.add(reply[0]!)
      if (reply[0] === 0) admitted++
    }
    if (gap === 'pause') clock.now += 1 + Math.floor(random() * 400)
    if (gap === 'second') clock.now += MINUTE_WINDOW.bucketMs
    if (gap === 'minute') clock.now += 61_000
    if (gap === 'day') clock.now += DAY_WINDOW.bucketMs
  }
  t.same([...outcomes].sort(), [0, 1, 2, 3], 'the run met every outcome: ok, rate_limited, key_banned, ban_started')
  t.ok(admitted > 0 && admitted < decisions, `${admitted} of ${decisions} admitted`)
})

/** Two views of one Redis decision path: a store per side, and how to read its Redis clock. */
interface Side { readonly store: LimiterStore, readonly prefix: string }

/** Sleeps while the local clock (Redis TIME's on this host) is near a second boundary or a ban's end: both sides must meet them alike. */
async function clearOfEdges (critical: readonly number[]): Promise<void> {
  for (let i = 0; i < 20; i++) {
    const now = Date.now()
    const ms = now % 1000
    if (ms >= 930) { await sleep(1000 - ms + 15); continue }
    if (ms < 10 || critical.some((c) => Math.abs(c - now) < 15)) { await sleep(20); continue }
    return
  }
}

/** Admissions `ageS` seconds old in `id`'s minute ring, written in the scripts' own layout. */
async function plant (client: Redis | Cluster, id: string, ageS: number, count: number): Promise<void> {
  const bucket = Math.floor(Date.now() / MINUTE_WINDOW.bucketMs) - ageS
  const [m] = redisKeys(id)
  await client.hset(m, 't', bucket, 'n', count, 'o', bucket, String(bucket % MINUTE_WINDOW.slots), count)
  await client.pexpire(m, MINUTE_WINDOW.slots * MINUTE_WINDOW.bucketMs)
}

/** Drives both sides with one sequence, each step's decisions in one turn on both; compares reply by reply. */
async function drive (t: Test, sides: { batched: Side, single: Side }, plantOn: (id: string) => Promise<void>): Promise<number> {
  await clearOfEdges([])
  for (const name of PLANTED) {
    await plantOn(`${sides.batched.prefix}${name}`)
    await plantOn(`${sides.single.prefix}${name}`)
  }
  let skew = 0
  let decisions = 0
  const outcomes = new Set<string>()
  const critical: number[] = []
  for (const { batch, gap } of sequence(45, 3, false)) {
    await clearOfEdges(critical)
    const issue = (side: Side): Array<Promise<ConsumeResult>> => batch.map(async (c) => await side.store.consume(`${side.prefix}${c.name}`, c.limits, c.ban))
    const both = [issue(sides.batched), issue(sides.single)]
    const [many, one] = await Promise.all(both.map(async (calls) => await Promise.all(calls)))
    batch.forEach((c, i) => {
      const b = many![i]!
      const s = one![i]!
      skew = Math.max(skew, Math.abs(b.now - s.now))
      const label = `decision ${decisions + i + 1} (${c.name})`
      t.same([b.outcome, b.minute.count, b.day.count], [s.outcome, s.minute.count, s.day.count], `${label}: ${s.outcome}, ${s.minute.count}/${s.day.count} on both paths`)
      const times = (r: ConsumeResult): number[] => [r.minute.resetAt, r.minute.retryAt, r.day.resetAt, r.day.retryAt, r.bannedUntil]
      const apart = Math.max(...times(b).map((x, k) => Math.abs(x - times(s)[k]!)))
      if (apart > skew) t.fail(`${label}: instants ${apart} ms apart, more than the calls' own ${skew} ms`)
      outcomes.add(s.outcome)
      if (s.bannedUntil > 0) critical.push(s.bannedUntil, b.bannedUntil)
    })
    decisions += batch.length
    if (gap === 'pause') await sleep(30 + (decisions % 5) * 30)
    if (gap === 'second') await sleep(1000 - (Date.now() % 1000) + 20)
  }
  t.same([...outcomes].sort(), ['ban_started', 'key_banned', 'ok', 'rate_limited'], 'the run met every outcome')
  // Counts and outcomes compare exactly whatever the skew; instants compare within it (a loaded machine may stretch it).
  t.ok(skew < MINUTE_WINDOW.bucketMs, `the two paths' calls were ${skew} ms apart at most: within one minute bucket (${MINUTE_WINDOW.bucketMs} ms)`)
  return decisions
}

t.test('real Redis (standalone): the batched store answers as the single-call store, request by request', async (t) => {
  const [a, b] = await Promise.all([startRedis(t), startRedis(t)])
  const [clientA, clientB] = [new Redis(a.url), new Redis(b.url)]
  const batched = createRedisStore(clientA, { batchMax: REDIS_BATCH_MAX })
  const single = createRedisStore(clientB, { batchMax: 1 })
  t.teardown(async () => { await Promise.all([batched.close(), single.close()]) })
  // Each script loaded (its first call is a NOSCRIPT EVALSHA, then EVAL) before the counting starts.
  await Promise.all([batched, single].map(async (store) => await Promise.all(['w1', 'w2'].map(async (id) => await store.consume(id, CONSUMERS[4]!.limits, null)))))
  await Promise.all([a.cli('CONFIG', 'RESETSTAT'), b.cli('CONFIG', 'RESETSTAT')])
  const decisions = await drive(t, { batched: { store: batched, prefix: 'x-' }, single: { store: single, prefix: 'x-' } }, async (id) => {
    await Promise.all([plant(clientA, id, 59, 2), plant(clientB, id, 59, 2)])
  })
  const [callsA, callsB] = await Promise.all([decisionScriptCalls(a.cli), decisionScriptCalls(b.cli)])
  t.equal(callsB, decisions, 'the single path: one script call per decision')
  t.ok(callsA < decisions / 2, `the batched path: ${callsA} script calls for ${decisions} decisions`)
})

t.test('real Redis Cluster: batches per slot answer as single calls, request by request', async (t) => {
  const cluster = await startRedisCluster(t)
  const connect = async (): Promise<Cluster> => {
    const client = new Cluster(cluster.nodes.map((n) => ({ host: '127.0.0.1', port: Number(n.split(':')[1]) })))
    await new Promise((resolve) => client.once('ready', resolve))
    return client
  }
  const [clientA, clientB] = await Promise.all([connect(), connect()])
  const batched = createRedisStore(clientA, { batchMax: REDIS_BATCH_MAX })
  const single = createRedisStore(clientB, { batchMax: 1 })
  t.teardown(async () => { await Promise.all([batched.close(), single.close()]) })
  await Promise.all(cluster.ports.map(async (port) => await cluster.cli(port, 'CONFIG', 'RESETSTAT')))
  const decisions = await drive(t, { batched: { store: batched, prefix: 'batched-' }, single: { store: single, prefix: 'single-' } }, async (id) => {
    await plant(clientA, id, 59, 2)
  })
  const calls = (await Promise.all(cluster.ports.map(async (port) => await decisionScriptCalls((...args) => cluster.cli(port, ...args))))).reduce((x, y) => x + y, 0)
  t.ok(calls < 2 * decisions, `${calls} script calls for ${decisions} decisions on each path: repeats of a consumer in one turn share a call`)
})
