// The two-process burst of a fresh consumer (4/3 of its minute limit, like the simulator's `burst`
// family) under load-like delays: a process's event loop blocked across a second boundary, so its
// give-back timer fires late and the other process's calls of the new second meet a block of the
// previous second that is still counted but not yet given back (docs/limiter-internals.md, "What a block
// could strand"). The burst must still reach its limit (≥ 98 %, as 294 of 300 on real processes) and
// never pass it. Built on the simulator's world, Redis model and processes (test/helpers/sim/); seeds
// fresh every run (printed), SIM_SEED=<seed> replays one.
import { randomInt } from 'node:crypto'
import t from 'tap'
import { violations } from '../../../helpers/sim/check.js'
import { SimProcess } from '../../../helpers/sim/process.js'
import { createLuaVm, SimRedis } from '../../../helpers/sim/redis-model.js'
import { singleRedis } from '../../../helpers/sim/topology.js'
import { World } from '../../../helpers/sim/world.js'

const COUNT = Number(process.env.SIM_COUNT ?? 40)
const YEAR_START = Date.UTC(2030, 0, 1)

interface Outcome { readonly limit: number, readonly requests: number, readonly admitted: number, readonly over: number, readonly unanswered: number, readonly refused: Record<string, number>, readonly describe: string }

async function runBurst (seed: number, vm: Awaited<ReturnType<typeof createLuaVm>>): Promise<Outcome> {
  const world = new World(seed, 0)
  const start = YEAR_START + Math.floor(world.random() * 360) * 86_400_000 + world.between(0, 86_400_000)
  world.now = start - 5000
  const skew = world.between(-300, 300)
  const redis = new SimRedis(world, skew, vm)
  redis.set('rl:{#epoch}', 'deployed,0')
  const net = { base: world.between(0.05, 1), jitter: world.between(0, 1), slowChance: 0, slowMs: 0 }
  const processes = [0, 1].map((i) => new SimProcess(world, singleRedis(redis), `p${i}`, {
    policy: 'local', timeoutMs: 250, barrierMs: 2000, offset: world.between(-1e6, 1e6), drift: world.between(-2e-4, 2e-4), net
  }))
  for (const p of processes) void p.grants.settled(0)
  const limit = Math.floor(world.between(60, 401))
  const ask = { limits: { perMinute: limit, perDay: limit * 10 }, ban: null, cost: 1, monthLimit: 0, overage: false }
  // Spread over up to 2.5 s from anywhere in a second: even, or moving from process 0 to process 1.
  const spread = world.between(50, 2500)
  const from = start + world.between(0, 1000)
  const moving = world.chance(0.5)
  const requests = Math.ceil(limit * 4 / 3)
  for (let i = 0; i < requests; i++) {
    const at = world.between(0, spread)
    const process = moving ? (world.chance(at / spread) ? 1 : 0) : i % 2
    world.at(from + at, () => { processes[process]!.request('burst', ask) })
  }
  // Load: each process's loop blocked now and then, 20–400 ms from just before a second boundary (by Redis's clock).
  const stalls: string[] = []
  for (let second = 0; second < 4; second++) {
    for (const [i, p] of processes.entries()) {
      if (!world.chance(0.8)) continue
      const boundary = Math.ceil((from + skew) / 1000) * 1000 + second * 1000 - skew
      const at = boundary - world.between(0, 30)
      const ms = world.between(20, 400)
      stalls.push(`p${i}@${(at - from).toFixed(0)}ms ${ms.toFixed(0)}ms`)
      world.at(at, () => { p.stall(ms) })
    }
  }
  await world.run(from + 15_000)
  const admissions = processes.flatMap((p) => p.admissions)
  const found = violations(admissions, new Map([['burst', { perMinute: limit, perDay: limit * 10, perMonth: 0 }]]))
  const refused: Record<string, number> = {}
  for (const p of processes) for (const r of p.refusals) refused[r.outcome] = (refused[r.outcome] ?? 0) + 1
  return {
    limit,
    requests,
    admitted: admissions.length,
    over: found.reduce((n, v) => Math.max(n, v.units - v.limit), 0),
    unanswered: processes.reduce((n, p) => n + p.waiting, 0),
    refused,
    describe: `seed ${seed}: ${requests} requests on ${limit}/min over ${spread.toFixed(0)} ms (${moving ? 'moving' : 'even'}), stalls ${stalls.join(', ') || 'none'}, refused ${JSON.stringify(refused)}`
  }
}

const vm = await createLuaVm()
const base = process.env.SIM_SEEDS_FROM !== undefined ? Number(process.env.SIM_SEEDS_FROM) : randomInt(1, 2 ** 40)
const seeds = process.env.SIM_SEED !== undefined ? [Number(process.env.SIM_SEED)] : Array.from({ length: COUNT }, (_, i) => base + i)
t.comment(`seeds ${seeds[0]}…${seeds[seeds.length - 1]} (replay: SIM_SEEDS_FROM=${seeds[0]} or SIM_SEED=<seed>)`)
let short = 0
let worst = 1
for (const seed of seeds) {
  const r = await runBurst(seed, vm)
  const share = r.admitted / r.limit
  worst = Math.min(worst, share)
  if (share < 0.98) short++
  if (r.over > 0 || r.unanswered > 0 || share < 0.98) t.comment(`${r.describe}: admitted ${r.admitted}`)
  t.equal(r.over, 0, `seed ${seed}: never over the limit`)
  t.equal(r.unanswered, 0, `seed ${seed}: every request answered`)
  t.ok(share >= 0.98, `seed ${seed}: ${r.admitted} of ${r.limit} admitted (≥ 98 %)`)
}
t.comment(`${short} of ${seeds.length} bursts short of 98 %; the fewest admitted ${(100 * worst).toFixed(1)} % of the limit`)
