// Issue 38's finding on real processes, made deterministic: two gateway processes on one Redis, many
// consumers by Zipf (a few hot), a loaded machine (event loops blocked now and then, calls slow enough
// to time out before any fault), then Redis frozen. What each process holds in Redis's reserves when
// the outage begins must be spendable through it: a process that admits far less from its reserve
// than Redis keeps back for it refuses busy consumers that are nowhere near their limits. Checked per
// consumer and process (seen there steadily before the outage, so not handing it back): reserve admissions ≥ what was held (or what was asked, if less) less a small
// margin; and every rolling window within the limit (0 over: a reserve admission is within the limit).
// Built on the simulator's world, Redis model and processes (test/helpers/sim/); seeds fresh every
// run (printed), SIM_SEED=<seed> replays one.
import { randomInt } from 'node:crypto'
import t from 'tap'
import { violations } from '../../../helpers/sim/check.js'
import { zipfPicker } from '../../../helpers/sim/outage-schedules.js'
import { createLuaVm } from '../../../helpers/sim/redis-model.js'
import { reserveWorld } from '../../../helpers/sim/reserve-world.js'
import { IDLE_MS } from '../../../../src/gateway/limiter/redis/calls.js'
import { limiterKey } from '../../../../src/gateway/redis/keys.js'

const COUNT = Number(process.env.SIM_COUNT ?? 6)
/** Seeds that found a reserve left unspent before the fix (about 1 fresh seed in 12 does): they run first, every time. */
const REGRESSION_SEEDS = [1005, 1008, 1023, 5005, 5010]
const CONSUMERS = 200
/** Reserve admissions a consumer may fall short of on one process (requests the outage policy met mid-call). */
const SHORT_MARGIN = 3
/**
 * A reserve is checked when its consumer arrived at its process with no gap over MAX_GAP_MS in the STEADY_BEFORE_MS before
 * the outage: well within IDLE_MS, so not handed back even when a stalled loop reads an arrival late.
 */
const STEADY_BEFORE_MS = 5_000
/** The longest blocked loop: an arrival read this late still finds its consumer unseen for under IDLE_MS (a gap ≤ MAX_GAP_MS). */
const MAX_STALL_MS = 800
const MAX_GAP_MS = IDLE_MS - MAX_STALL_MS - 100

interface Held { readonly consumer: string, readonly process: number, readonly held: number, readonly demand: number, readonly spent: number }
interface Outcome { readonly held: Held[], readonly over: number, readonly unanswered: number, readonly describe: string }

async function run (seed: number, vm: Awaited<ReturnType<typeof createLuaVm>>): Promise<Outcome> {
  const { world, start, redis, processes, limits, ask } = reserveWorld(seed, vm)
  const warm = world.between(10_000, 20_000)
  const outageMs = world.between(15_000, 40_000)
  const freeze = start + warm
  const end = freeze + outageMs + 8_000
  const rate = world.between(40, 80) / 1000 // requests per virtual ms, all consumers
  const pick = zipfPicker(CONSUMERS)
  const arrivals: Array<{ t: number, process: number, consumer: number }> = []
  for (let at = start; at < end; at += -Math.log(1 - world.random()) / rate) arrivals.push({ t: at, process: world.chance(0.5) ? 1 : 0, consumer: pick(world.random()) })
  for (const a of arrivals) world.at(a.t, () => { processes[a.process]!.request(`c${a.consumer}`, ask) })
  // Load: each process's loop blocked 20–800 ms every second or two, and calls slowed past their budget now and then.
  const load: string[] = []
  for (const [i, p] of processes.entries()) {
    for (let at = start + world.between(0, 2000); at < end; at += world.between(500, 2500)) {
      const ms = world.chance(0.3) ? world.between(300, MAX_STALL_MS) : world.between(20, 300)
      world.at(at, () => { p.stall(ms) })
    }
    for (let at = start + world.between(0, 3000); at < freeze + 1000; at += world.between(1500, 5000)) {
      const ms = world.between(200, 1500)
      const delay = world.between(100, 400)
      load.push(`slow p${i}@${((at - start) / 1000).toFixed(1)}s`)
      world.at(at, () => { p.slow(ms, delay) })
    }
  }
  // The outage: what each process holds in Redis's reserves for each consumer when it begins.
  const held = new Map<string, number>()
  world.at(freeze, () => {
    for (let c = 0; c < CONSUMERS; c++) {
      for (const [holder, units, until] of (redis.peek(limiterKey(`c${c}`), 'r') ?? '').split(';').filter((x) => x !== '').map((x) => x.split(','))) {
        if (Number(until) > redis.time()) held.set(`c${c}/${holder}`, Number(units))
      }
    }
    redis.pause()
  })
  world.at(freeze + outageMs, () => { redis.resume() })
  await world.run(end + 10_000)
  const admissions = processes.flatMap((p) => p.admissions)
  const found = violations(admissions, new Map(Array.from({ length: CONSUMERS }, (_, c) => [`c${c}`, { ...limits, perMonth: 0 }])))
  // Per consumer and process: what was held, what the outage's spendable stretch (its first 55 s) brought, what the reserve admitted.
  const rows: Held[] = []
  for (const [k, units] of held) {
    const [consumer, holder] = k.split('/') as [string, string]
    const process = Number(holder.slice(1))
    const demand = arrivals.filter((a) => a.process === process && `c${a.consumer}` === consumer && a.t >= freeze + 300 && a.t < freeze + Math.min(outageMs, 55_000)).length
    const spent = processes[process]!.admissions.filter((a) => a.consumer === consumer && a.via === 'reserve').length
    // A consumer unseen here for IDLE_MS hands its reserve back (rightly: that call may have run, and may be the one in
    // flight at the freeze); one arriving here without such a gap in the seconds before the freeze keeps it.
    const times = [freeze - STEADY_BEFORE_MS, ...arrivals.filter((a) => a.process === process && `c${a.consumer}` === consumer && a.t >= freeze - STEADY_BEFORE_MS && a.t < freeze).map((a) => a.t), freeze]
    const steady = times.every((at, i) => i === 0 || at - times[i - 1]! <= MAX_GAP_MS)
    if (steady) rows.push({ consumer, process, held: units, demand, spent })
  }
  return {
    held: rows,
    over: found.reduce((n, v) => Math.max(n, v.units - v.limit), 0),
    unanswered: processes.reduce((n, p) => n + p.waiting, 0),
    describe: `seed ${seed}: ${arrivals.length} requests at ${(rate * 1000).toFixed(0)}/s, freeze at ${(warm / 1000).toFixed(1)} s for ${(outageMs / 1000).toFixed(1)} s, ${load.length} slow stretches`
  }
}

const vm = await createLuaVm()
const base = process.env.SIM_SEEDS_FROM !== undefined ? Number(process.env.SIM_SEEDS_FROM) : randomInt(1, 2 ** 40)
const seeds = process.env.SIM_SEED !== undefined ? [Number(process.env.SIM_SEED)] : [...REGRESSION_SEEDS, ...Array.from({ length: COUNT }, (_, i) => base + i)]
t.comment(`regression seeds ${REGRESSION_SEEDS.join(', ')}, then fresh seeds ${base}…${base + COUNT - 1} (replay: SIM_SEEDS_FROM=${base} or SIM_SEED=<seed>)`)
let totalHeld = 0
let totalSpendable = 0
let totalSpent = 0
for (const seed of seeds) {
  const r = await run(seed, vm)
  const short = r.held.filter((h) => h.spent + SHORT_MARGIN < Math.min(h.held, h.demand))
  const spendable = r.held.reduce((n, h) => n + Math.min(h.held, h.demand), 0)
  const spent = r.held.reduce((n, h) => n + Math.min(h.spent, h.held), 0)
  totalHeld += r.held.reduce((n, h) => n + h.held, 0)
  totalSpendable += spendable
  totalSpent += spent
  t.comment(`${r.describe}: ${r.held.length} reserves held (${r.held.reduce((n, h) => n + h.held, 0)} units), ${spent} of ${spendable} spendable admitted from them; short: ${short.slice(0, 5).map((h) => `${h.consumer}@p${h.process} held ${h.held} asked ${h.demand} spent ${h.spent}`).join(', ') || 'none'}`)
  t.equal(r.over, 0, `seed ${seed}: never over a limit`)
  t.equal(r.unanswered, 0, `seed ${seed}: every request answered`)
  t.same(short.map((h) => `${h.consumer}@p${h.process}`), [], `seed ${seed}: every reserve held at the outage's start is spent (less ${SHORT_MARGIN}) while requests ask for it`)
}
t.comment(`reserves held at the outage's start: ${totalHeld} units; ${totalSpent} of ${totalSpendable} spendable units admitted from them (${totalSpendable === 0 ? 100 : (100 * totalSpent / totalSpendable).toFixed(1)} %)`)
