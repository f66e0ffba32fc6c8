// docs/decisions.md §7 against real processes, with the shipped defaults: a redis-server killed
// under steady load and restarted on its port, a redis-server frozen with SIGSTOP (connections
// open, no answers), the `closed` and `open` policies, and a Cluster master lost. Under `local` a
// consumer busy before the outage (with room left) is answered from its reserve: no request fails,
// requests stay fast during the outage, gateway_store_fallback_active goes 1 and back to 0, and
// counting returns to Redis by itself. (What the limit becomes through such faults, attacked by two
// gateway processes at the limit, is in attack-*.test.ts and the simulator.)
import t from 'tap'
import { createHash } from 'node:crypto'
import { startBackend } from '../../helpers/backend.js'
import { startGateway, type StartedGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS, plansYaml, testConfig } from '../../helpers/config-fixture.js'
import { poll, sleep } from '../../helpers/poll.js'
import { reserveUnits, scriptCalls, startRedis, startRedisCluster } from '../../helpers/redis.js'
import { parseScrape, sampleValue } from '../../helpers/scrape.js'
import { FIELD } from '../../../src/gateway/limiter/redis/layout.js'

/** Limits far above what the load sends, so every answer should be 200 unless something fails. */
const HIGH_LIMIT = 100_000
const HIGH_PLANS = plansYaml({ business: { perMinute: HIGH_LIMIT, perDay: 1_000_000 } })
const CONCURRENCY = 8
/**
 * Each loop starts a request at most every PACE_MS (8 loops: up to 320 requests/s). Unpaced, the loops took every
 * cycle the machine had (about 700 requests/s and 22 s of CPU for the file in a suite); what the checks need is a
 * consumer seen busy, requests during each outage and a latency baseline taken at the same rate.
 */
const PACE_MS = 25
/** Long enough for a consumer to count as busy (seen in two seconds running): it holds a reserve. */
const WARM_UP_MS = 2_200

interface Sample { readonly start: number, readonly ms: number, readonly status: number, readonly key: string, readonly remaining: number }

/** Steady concurrent load: CONCURRENCY loops of one request each, paced (PACE_MS), until stopped. */
function load (url: string, keys: readonly string[]): { samples: Sample[], stop: () => Promise<Sample[]> } {
  const samples: Sample[] = []
  let stopped = false
  const loops = Array.from({ length: CONCURRENCY }, async (_, i) => {
    for (let n = 0; !stopped; n++) {
      const start = performance.now()
      const key = keys[(i + n) % keys.length]!
      let status = 0
      let remaining = -1
      try {
        const res = await fetch(`${url}/v1/pets?limit=1`, { headers: bearer(key) })
        await res.arrayBuffer()
        status = res.status
        remaining = Number(res.headers.get('x-ratelimit-remaining') ?? -1)
      } catch { /* status 0: the request itself failed */ }
      samples.push({ start, ms: performance.now() - start, status, key, remaining })
      const idle = start + PACE_MS - performance.now()
      if (idle > 0 && !stopped) await sleep(idle)
    }
  })
  return { samples, stop: async () => { stopped = true; await Promise.all(loops); return samples } }
}

function p90 (values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.9))] ?? 0
}

/**
 * A fault's added wait, load taken out: the same load's figure before the fault (on the same machine, at
 * the same moment) plus what the fault may add by design — the store's timeout budget, `addedMs`. A loaded
 * machine slows both alike; a request that waits on a dead store beyond its budget still fails it.
 */
function withinBudget (during: number, before: number, addedMs: number): boolean {
  return during <= before + addedMs
}

async function fallbackGauge (gw: StartedGateway): Promise<number | undefined> {
  const res = await fetch(`${gw.adminUrl}/metrics`)
  return sampleValue(parseScrape(await res.text()), 'gateway_store_fallback_active')
}

/** Units the business demo consumer has counted in its day window in Redis (printed: give-backs can make it fall while Redis counts). */
async function countedInRedis (cli: (...args: string[]) => Promise<string>): Promise<number> {
  return Number(await cli('HGET', 'rl:{demo-business}', FIELD.dayUnits))
}

function statusCounts (samples: Sample[]): Record<number, number> {
  const counts: Record<number, number> = {}
  for (const s of samples) counts[s.status] = (counts[s.status] ?? 0) + 1
  return counts
}

t.test('local: redis-server killed under load, restarted on its port', async (t) => {
  const redis = await startRedis(t)
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': HIGH_PLANS }), limiter: { settings: { redisUrl: redis.url } } })
  const traffic = load(gw.url, [DEMO_KEYS.business])
  await sleep(WARM_UP_MS)
  t.equal(gw.app.limiterStatus.fallbackActive(), false)

  const killedAt = performance.now()
  redis.signal('SIGKILL')
  await redis.stop()
  t.ok(await poll(() => gw.app.limiterStatus.fallbackActive(), 1_000), 'the shard goes down')
  t.equal(await fallbackGauge(gw), 1, 'gateway_store_fallback_active 1 during the outage')
  await sleep(800)
  const restartedAt = performance.now()
  await redis.start()
  t.ok(await poll(() => !gw.app.limiterStatus.fallbackActive(), 6_000), 'it comes back up by itself')
  t.equal(await fallbackGauge(gw), 0, 'and the gauge returns to 0')
  const recoveredAt = performance.now()
  const [before, callsBefore] = [await countedInRedis(redis.cli), await scriptCalls(redis.cli)]
  await sleep(1_200)
  const samples = await traffic.stop()
  const [after, callsAfter] = [await countedInRedis(redis.cli), await scriptCalls(redis.cli)]

  const at = (s: Sample): string => `${s.status}@${(s.start - killedAt).toFixed(0)}ms`
  t.same(statusCounts(samples), { 200: samples.length }, `every request admitted: no 5xx, no failure (${samples.filter((s) => s.status !== 200).map(at).join(' ')}; restarted at ${(restartedAt - killedAt).toFixed(0)} ms)`)
  const outage = samples.filter((s) => s.start >= killedAt && s.start < restartedAt).map((s) => s.ms)
  t.ok(outage.length > 20, `load went on during the outage (${outage.length} requests)`)
  const calm = samples.filter((s) => s.start < killedAt).map((s) => s.ms)
  t.ok(withinBudget(p90(outage), p90(calm), 300), `p90 during the outage ${p90(outage).toFixed(1)} ms ≤ p90 before it ${p90(calm).toFixed(1)} ms + 300 ms`)
  // Grant calls reaching the restarted Redis, as in the freeze below (a net count can fall while blocks are given back).
  t.ok(callsAfter > callsBefore, `counting is back in Redis: ${callsAfter - callsBefore} grant calls in 1.2 s after recovery`)
  t.ok(gw.app.limiterStatus.storeErrors() > 0, 'the failures are counted')
  t.comment(`kill: ${samples.length} requests, outage p90 ${p90(outage).toFixed(1)} ms (max ${Math.max(...outage).toFixed(1)}), ` +
    `recovery ${(recoveredAt - restartedAt).toFixed(0)} ms after restart (the recovery barrier included), ${after - before} counted in 1.2 s after, ` +
    `storeErrors ${gw.app.limiterStatus.storeErrors()}`)
})

t.test('local: redis-server frozen (SIGSTOP) answers nothing; requests wait at most the timeout budget', async (t) => {
  const redis = await startRedis(t)
  t.teardown(() => redis.signal('SIGCONT'))
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': HIGH_PLANS }), limiter: { settings: { redisUrl: redis.url } } })
  const traffic = load(gw.url, [DEMO_KEYS.business])
  await sleep(WARM_UP_MS)
  const stoppedAt = performance.now()
  redis.signal('SIGSTOP')
  try {
    // Units already counted (the pool) answer until their second ends; the next call then waits out its budget.
    t.ok(await poll(() => gw.app.limiterStatus.fallbackActive(), 2_000), 'the shard goes down on a timeout')
    await sleep(800)
  } finally {
    redis.signal('SIGCONT')
  }
  const resumedAt = performance.now()
  t.ok(await poll(() => !gw.app.limiterStatus.fallbackActive(), 4_000), 'after SIGCONT it comes back up by itself')
  // Counting is back when grant calls reach Redis again. Not the net count: blocks held through the freeze are given
  // back after it, and beside a CPU hog the traffic of 1.2 s counted fewer units than those give-backs (-65, once in 5).
  const [before, callsBefore] = [await countedInRedis(redis.cli), await scriptCalls(redis.cli)]
  await sleep(1_200)
  const samples = await traffic.stop()
  const [after, callsAfter] = [await countedInRedis(redis.cli), await scriptCalls(redis.cli)]

  t.same(statusCounts(samples), { 200: samples.length }, 'every request admitted')
  const frozen = samples.filter((s) => s.start >= stoppedAt && s.start < resumedAt).map((s) => s.ms)
  t.ok(frozen.length > 20, `load went on while frozen (${frozen.length} requests)`)
  const calm = samples.filter((s) => s.start < stoppedAt).map((s) => s.ms)
  t.ok(withinBudget(p90(frozen), p90(calm), 300), `p90 while frozen ${p90(frozen).toFixed(1)} ms ≤ p90 before it ${p90(calm).toFixed(1)} ms + 300 ms`)
  t.ok(withinBudget(Math.max(...frozen), Math.max(...calm), 1_000), `no request hangs (max ${Math.max(...frozen).toFixed(1)} ms ≤ max before ${Math.max(...calm).toFixed(1)} ms + 1,000 ms)`)
  t.ok(callsAfter > callsBefore, `counting is back in Redis: ${callsAfter - callsBefore} grant calls in 1.2 s after the thaw`)
  t.comment(`SIGSTOP: outage p90 ${p90(frozen).toFixed(1)} ms (max ${Math.max(...frozen).toFixed(1)}), net ${after - before} counted in 1.2 s after the thaw, storeErrors ${gw.app.limiterStatus.storeErrors()}`)
})

t.test('closed: 503 unavailable with the Error shape and "retry shortly" rate-limit headers; open: admitted', async (t) => {
  const redis = await startRedis(t)
  const backend = await startBackend(t)
  const [closed, open] = await Promise.all((['closed', 'open'] as const).map(async (storeOnError) =>
    await startGateway(t, { backendUrl: backend.url, limiter: { settings: { redisUrl: redis.url, storeOnError } } })))
  await redis.stop()

  const started = Date.now()
  const refused = await fetch(`${closed!.url}/v1/pets`, { headers: bearer(DEMO_KEYS.pro) })
  t.ok(Date.now() - started < 500, 'answered at once')
  t.equal(refused.status, 503)
  t.equal(refused.headers.get('content-type'), 'application/json; charset=utf-8')
  t.same(await refused.json(), { code: 'unavailable', message: 'The rate limiter is unavailable', status: 503 })
  const now = Math.ceil(Date.now() / 1000)
  t.equal(refused.headers.get('retry-after'), '1')
  t.equal(refused.headers.get('x-ratelimit-limit'), '300')
  t.equal(refused.headers.get('x-ratelimit-remaining'), '0')
  t.ok(Math.abs(Number(refused.headers.get('x-ratelimit-reset')) - (now + 1)) <= 1, 'reset: now + 1 s')
  t.equal(refused.headers.get('ratelimit-policy'), '"minute";q=300;w=60, "day";q=10000;w=86400')
  t.equal(refused.headers.get('ratelimit'), '"minute";r=0;t=1')
  t.ok(refused.headers.get('x-request-id'))
  const ready = await fetch(`${closed!.adminUrl}/readyz`)
  t.equal(ready.status, 503, 'closed: not ready while Redis is down (it cannot serve)')
  await ready.arrayBuffer()

  const admitted = await fetch(`${open!.url}/v1/pets`, { headers: bearer(DEMO_KEYS.pro) })
  t.equal(admitted.status, 200, 'open: admitted')
  await admitted.arrayBuffer()
  t.equal(admitted.headers.get('x-ratelimit-limit'), '300', 'with the headers of the key\'s policy')
  t.equal(admitted.headers.get('x-ratelimit-remaining'), '300', 'nothing counted: the full limit')
  t.equal(admitted.headers.get('ratelimit-policy'), '"minute";q=300;w=60, "day";q=10000;w=86400')
  const openReady = await fetch(`${open!.adminUrl}/readyz`)
  t.equal(openReady.status, 200, 'open: still ready (it serves)')
  await openReady.arrayBuffer()
  t.equal(open!.app.limiterStatus.fallbackActive(), true, 'the shard is down')
})

/** Keys (plaintext → id) spread over the slots, to find some on the node we kill and some elsewhere. */
const CLUSTER_KEYS = Array.from({ length: 12 }, (_, i) => ({ id: `cluster-${i}`, key: `psk_test_cluster_${i}_${'x'.repeat(20)}` }))

t.test('Cluster: one master lost; surviving slots keep counting in Redis, lost slots answer from reserves; no 5xx', async (t) => {
  const cluster = await startRedisCluster(t, 3, ['--cluster-require-full-coverage', 'no'])
  const keysYaml = 'keys:\n' + CLUSTER_KEYS.map(({ id, key }) =>
    `  - { id: ${id}, sha256: ${createHash('sha256').update(key).digest('hex')}, plan: business }\n`).join('')
  const gw = await startGateway(t, {
    config: testConfig({ 'plans.yaml': HIGH_PLANS, 'keys.yaml': keysYaml }),
    limiter: { settings: { redisClusterNodes: cluster.nodes } }
  })
  const owner = new Map<string, number>()
  const slotsOf = new Map<number, Array<[number, number]>>()
  for (const line of (await cluster.cli(cluster.ports[0]!, 'CLUSTER', 'NODES')).split('\n')) {
    const parts = line.split(' ')
    const port = Number(/:(\d+)@/.exec(parts[1] ?? '')?.[1])
    slotsOf.set(port, parts.slice(8).map((r) => r.split('-').map(Number) as [number, number]).map(([a, b]) => [a, b ?? a]))
  }
  for (const { id } of CLUSTER_KEYS) {
    const slot = Number(await cluster.cli(cluster.ports[0]!, 'CLUSTER', 'KEYSLOT', `{${id}}`))
    for (const [port, ranges] of slotsOf) if (ranges.some(([a, b]) => slot >= a && slot <= b)) owner.set(id, port)
  }
  const victim = owner.get(CLUSTER_KEYS[0]!.id)!
  const lost = CLUSTER_KEYS.filter(({ id }) => owner.get(id) === victim)
  const kept = CLUSTER_KEYS.filter(({ id }) => owner.get(id) !== victim)
  t.ok(kept.length > 0 && lost.length > 0, `${lost.length} keys on the lost master, ${kept.length} elsewhere`)

  const traffic = load(gw.url, CLUSTER_KEYS.map((k) => k.key))
  // Every key counted a few times in Redis first, so its Remaining has come down before the loss,
  // and busy for two seconds running, so it holds a reserve.
  await poll(() => CLUSTER_KEYS.every(({ key }) => traffic.samples.filter((s) => s.key === key && s.status === 200).length >= 3), 10_000)
  await sleep(WARM_UP_MS)
  // A key whose traffic a loaded machine held up for a second is no longer busy and holds no reserve
  // (by design: its lost requests are then 503): the loss comes once every lost key holds one.
  const reserveOf = async (id: string): Promise<number> => reserveUnits(await cluster.cli(victim, 'HGET', `rl:{${id}}`, FIELD.reserves))
  t.ok(await poll(async () => (await Promise.all(lost.map(async ({ id }) => await reserveOf(id)))).every((units) => units > 0), 10_000),
    'every key on the master about to be lost holds a reserve there')
  cluster.signal(victim, 'SIGKILL')
  const killedAt = performance.now()
  await sleep(1_500)
  /** Requests counted in Redis for the keys on surviving masters (the minute ring's running total). */
  const counted = async (): Promise<number> => {
    let total = 0
    for (const { id } of kept) total += Number(await cluster.cli(owner.get(id)!, 'HGET', `rl:{${id}}`, FIELD.minuteUnits))
    return total
  }
  const countedBefore = await counted()
  const survivors = [...new Set(kept.map(({ id }) => owner.get(id)!))]
  const evalshas = async (): Promise<number[]> => await Promise.all(survivors.map(async (port) => await scriptCalls((...args) => cluster.cli(port, ...args))))
  const beforeStats = await evalshas()
  await sleep(1_500) // a minute bucket ends inside it: a busy key's next call
  const afterStats = await evalshas()
  const countedAfter = await counted()
  const samples = await traffic.stop()

  t.same(statusCounts(samples), { 200: samples.length }, 'every request admitted: no 5xx under local')
  t.ok(countedAfter > countedBefore, `surviving keys are still counted in Redis after the loss (${countedBefore} → ${countedAfter})`)
  // Remaining tells how it is counted: Redis keeps counting a surviving key down; a lost key is
  // answered from this process's reserve, which goes on from the count it last heard.
  // Answers received before the kill were Redis's; one in flight at the kill may be the fallback's own.
  const before = (key: string): number => Math.min(...samples.filter((s) => s.key === key && s.start + s.ms < killedAt && s.status === 200).map((s) => s.remaining))
  const late = (key: string): Sample[] => samples.filter((s) => s.key === key && s.start > killedAt && s.status === 200)
  for (const { key, id } of lost) {
    t.ok(late(key).length > 0, `${id} (lost master) still answered after the loss`)
    // Not "never above it": a block held at the kill and given back unspent (its second's end, a timer late on a loaded
    // machine) raises a later answer by what was never spent (99,790 → above it once in 5 beside a CPU hog). A count
    // started afresh would answer near the limit: every answer stays nearer the count last heard than that.
    const highest = Math.max(...late(key).map((s) => s.remaining))
    t.ok(highest < HIGH_LIMIT - (HIGH_LIMIT - before(key)) / 2, `${id} (lost master) is decided from the count last heard (${HIGH_LIMIT - before(key)} used), not afresh: highest remaining after the loss ${highest}`)
    t.ok(Math.min(...late(key).map((s) => s.remaining)) < before(key), `${id} (lost master): its reserve admissions count down from there`)
  }
  // The lowest remaining after the loss, not every one: a block given back at its second's end (a timer, late on a
  // loaded machine) raises a later answer's remaining by what was never spent, while the count still goes on.
  for (const { key, id } of kept) {
    const after = late(key).map((s) => s.remaining)
    t.ok(Math.min(...after) < before(key), `${id} (surviving master) keeps counting down in Redis (lowest remaining ${before(key)} before the loss, ${Math.min(...after)} after, over ${after.length} answers)`)
  }
  t.equal(gw.app.limiterStatus.fallbackActive(), true, 'the lost master\'s shard is down')
  const grew = afterStats.reduce((a, b) => a + b, 0) - beforeStats.reduce((a, b) => a + b, 0)
  t.ok(grew > 0, `surviving masters keep counting after the loss (${grew} EVALSHA in 1.5 s)`)
  const after = samples.filter((s) => s.start >= killedAt).map((s) => s.ms)
  const calm = samples.filter((s) => s.start + s.ms < killedAt).map((s) => s.ms)
  t.ok(withinBudget(p90(after), p90(calm), 300), `p90 after the loss ${p90(after).toFixed(1)} ms ≤ p90 before it ${p90(calm).toFixed(1)} ms + 300 ms`)
  t.comment(`cluster: ${lost.length}/${CLUSTER_KEYS.length} keys lost, ${after.length} requests after the loss, p90 ${p90(after).toFixed(1)} ms, ` +
    `${grew} EVALSHA on surviving masters in 1.5 s, storeErrors ${gw.app.limiterStatus.storeErrors()}, fallbackActive ${gw.app.limiterStatus.fallbackActive()}`)
})
