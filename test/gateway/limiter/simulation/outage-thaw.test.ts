// The thaw of a frozen Redis, in the simulator: once Redis answers again, a request is answered from
// Redis, not refused for an outage that is over (issue 38: after a 60 s freeze two of the busiest
// consumers, their reserve and allowance spent, got 503 in the first milliseconds after SIGCONT —
// their process still held the shard down: it learns that Redis answers a few round trips later,
// from a late reply, a probe and the epoch read). Two processes, 50 consumers by Zipf sending through
// a pause of 1–70 s (STORE_ON_ERROR=local with no allowance left, or strict: nothing admits what the
// reserves do not); around the thaw, requests of consumers with nothing to admit from (never seen:
// no reserve, no allowance) arrive, half in the THAW_FROM_MS before the thaw, half in the THAW_TO_MS
// after it; one way on the link takes 1–5 ms (a loaded machine), so a process sees the shard up some
// round trips after the thaw, as the real ones do (9–20 ms after a SIGCONT, quiet). Checked
// per schedule: every one of them admitted, by Redis (a refusal waits for its shard to answer again,
// at most the recovery's budget, 1 s here: calls.ts refuse); every rolling window within its limit (no admission
// but what Redis counted or a reserve covers); every request answered. Before the fix every schedule
// refused 14–20 of its 24: those that reached a process before it saw the shard up, 2–8 of the 12
// sent after the thaw among them.
// A family of the simulator's suite (test/helpers/sim/suite.ts runFamilies), `outage-thaw`: its regression seeds
// (regression-seeds.json) first, then seeds fresh every run (printed); SIM_FAMILY=outage-thaw SIM_SEED=<seed> replays
// one; SIM_COUNT(S), TEST_LONG as for every family; its `# sim-result` line lets the mutation gate (mutants.ts) count it.
import t from 'tap'
import { violations } from '../../../helpers/sim/check.js'
import { zipfPicker } from '../../../helpers/sim/outage-schedules.js'
import { SimProcess } from '../../../helpers/sim/process.js'
import { SimRedis, type LuaVm } from '../../../helpers/sim/redis-model.js'
import { runFamilies, type ScheduleOutcome } from '../../../helpers/sim/suite.js'
import { singleRedis } from '../../../helpers/sim/topology.js'
import { IO, World } from '../../../helpers/sim/world.js'
import type { StoreOnError } from '../../../../src/gateway/limiter/redis/outage.js'

const CONSUMERS = 50
/** STORE_TIMEOUT_MS of the processes: a call's budget (a refusal waits for its shard the larger of this and half the 2 s barrier). */
const TIMEOUT_MS = 250
/** Requests of consumers with nothing to admit from arrive from this long before the thaw… */
const THAW_FROM_MS = 150
/** …to this long after it. */
const THAW_TO_MS = 40
const THAW_REQUESTS = 24
const YEAR_START = Date.UTC(2030, 0, 1)

/** One schedule: the suite's outcome (every window, every request answered) and what became of the thaw's requests. */
interface ThawOutcome extends ScheduleOutcome { readonly thawRefused: number, readonly refusedAfterThaw: number, readonly thawAdmitted: number, readonly thawByRedis: number, readonly over: number }

async function run (seed: number, vm: LuaVm): Promise<ThawOutcome> {
  const world = new World(seed, 0)
  const start = YEAR_START + Math.floor(world.random() * 360) * 86_400_000 + world.between(0, 86_400_000)
  world.now = start - 5000
  const redis = new SimRedis(world, world.between(-300, 300), vm)
  redis.set('rl:{#epoch}', 'deployed,0')
  const policy: StoreOnError = world.chance(0.5) ? 'local' : 'strict'
  // One way 1–5 ms (a loaded machine's loop and link): the process sees the shard up a few round trips after the thaw.
  const net = { base: world.between(1, 5), jitter: world.between(0, 2), slowChance: 0, slowMs: 0 }
  const processes = [0, 1].map((i) => new SimProcess(world, singleRedis(redis), `p${i}`, {
    policy, allowance: { share: 0, processes: 2 }, timeoutMs: TIMEOUT_MS, barrierMs: 2000, offset: world.between(-1e6, 1e6), drift: world.between(-2e-4, 2e-4), net
  }))
  for (const p of processes) void p.grants.settled(0)
  const limits = { perMinute: 3000, perDay: 3000 * 50 }
  const ask = { limits, ban: null, cost: 1, monthLimit: 0, overage: false }
  const freeze = start + world.between(8_000, 15_000)
  const outageMs = world.chance(0.3) ? world.between(1_000, 5_000) : world.between(5_000, 70_000)
  const thaw = freeze + outageMs
  const end = thaw + 5_000
  const rate = world.between(20, 60) / 1000 // requests per virtual ms, all consumers
  const pick = zipfPicker(CONSUMERS)
  let arrivals = 0
  for (let at = start; at < end; at += -Math.log(1 - world.random()) / rate) {
    const process = processes[world.chance(0.5) ? 1 : 0]!
    const consumer = pick(world.random())
    world.at(at, () => { process.request(`c${consumer}`, ask) }, process, IO)
    arrivals++
  }
  // Half before the thaw, half after it.
  const thawArrivals = Array.from({ length: THAW_REQUESTS }, (_, k) => ({ t: thaw + (k < THAW_REQUESTS / 2 ? -world.between(0, THAW_FROM_MS) : world.between(0, THAW_TO_MS)), process: k % 2, consumer: `thaw${k}` }))
  for (const a of thawArrivals) world.at(a.t, () => { processes[a.process]!.request(a.consumer, ask) }, processes[a.process], IO)
  world.at(freeze, () => { redis.pause() })
  world.at(thaw, () => { redis.resume() })
  await world.run(end + 10_000)
  const admissions = processes.flatMap((p) => p.admissions)
  const isThaw = (consumer: string): boolean => consumer.startsWith('thaw')
  const ids = [...Array.from({ length: CONSUMERS }, (_, c) => `c${c}`), ...thawArrivals.map((a) => a.consumer)]
  const found = violations(admissions, new Map(ids.map((id) => [id, { ...limits, perMonth: 0 }])))
  const thawAdmissions = admissions.filter((a) => isThaw(a.consumer))
  const refused = new Set(processes.flatMap((p) => p.refusals.filter((r) => isThaw(r.consumer)).map((r) => r.consumer)))
  const thawRefused = refused.size
  const refusedAfterThaw = thawArrivals.filter((a) => a.t >= thaw && refused.has(a.consumer)).length
  const thawAdmitted = thawAdmissions.length
  const thawByRedis = thawAdmissions.filter((a) => a.via === 'redis' || a.via === 'grant').length
  const over = found.reduce((n, v) => Math.max(n, v.units - v.limit), 0)
  const unanswered = processes.reduce((n, p) => n + p.waiting, 0)
  return {
    violations: found,
    unanswered,
    requests: arrivals + THAW_REQUESTS,
    admitted: admissions.length,
    thawRefused,
    refusedAfterThaw,
    thawAdmitted,
    thawByRedis,
    over,
    describe: () => `seed ${seed}: ${policy}, a ${(outageMs / 1000).toFixed(1)} s pause, ${(rate * 1000).toFixed(0)} requests/s: of ${THAW_REQUESTS} requests around the thaw ${thawAdmitted} admitted (${thawByRedis} by Redis), ${thawRefused} refused (${refusedAfterThaw} sent after the thaw); ${found.length} windows over (by up to ${over}), ${unanswered} unanswered`
  }
}

// 8 schedules by default (about 0.3 s of CPU each), 100 under TEST_LONG=1; regression seed 38 (regression-seeds.json)
// refused 20 of its 24 thaw requests before the fix, 8 of them sent after the thaw (a 67 s pause, strict).
let refusedSeen = 0
let byRedis = 0
let schedules = 0
await runFamilies(t, 'test/gateway/limiter/simulation/outage-thaw.test.ts', [{
  family: 'outage-thaw',
  count: 8,
  longCount: 100,
  schedule: run,
  check (t, r) {
    schedules++
    refusedSeen += r.thawRefused
    byRedis += r.thawByRedis
    t.ok(r.thawRefused === 0, `no request around the thaw refused (it waits for Redis): ${r.thawRefused} refused, ${r.refusedAfterThaw} of them sent after the thaw`)
    t.ok(r.thawByRedis === THAW_REQUESTS, `each of the ${THAW_REQUESTS} requests around the thaw admitted by Redis: ${r.thawByRedis}`)
    t.ok(r.over === 0, `never over a limit (${r.over})`)
  }
}])
t.comment(`${schedules} schedules: of their ${schedules * THAW_REQUESTS} requests around the thaw ${byRedis} admitted by Redis, ${refusedSeen} refused`)
