// The world both reserve families start from (reserve-under-load, reserve-after-stall): one Redis with a
// skewed clock, two processes under `local` with the allowance shared between them, a slightly lossy
// network, and a consumer with 3,000 a minute. The draws are made in one fixed order, so a seed replays
// the same world in either family.
import { SimProcess } from './process.js'
import { type createLuaVm, SimRedis } from './redis-model.js'
import { singleRedis } from './topology.js'
import { World } from './world.js'

const YEAR_START = Date.UTC(2030, 0, 1)

export interface ReserveWorld {
  readonly world: World
  /** Virtual ms when traffic starts (the world's clock is 5 s before it). */
  readonly start: number
  readonly redis: SimRedis
  readonly processes: SimProcess[]
  readonly limits: { perMinute: number, perDay: number }
  readonly ask: { limits: { perMinute: number, perDay: number }, ban: null, cost: number, monthLimit: number, overage: boolean }
}

export function reserveWorld (seed: number, vm: Awaited<ReturnType<typeof createLuaVm>>): ReserveWorld {
  const world = new World(seed, 0)
  const start = YEAR_START + Math.floor(world.random() * 360) * 86_400_000 + world.between(0, 86_400_000)
  world.now = start - 5000
  const redis = new SimRedis(world, world.between(-300, 300), vm)
  redis.set('rl:{#epoch}', 'deployed,0')
  const net = { base: world.between(0.05, 1), jitter: world.between(0, 1), slowChance: 0.01, slowMs: world.between(50, 400) }
  const processes = [0, 1].map((i) => new SimProcess(world, singleRedis(redis), `p${i}`, {
    policy: 'local', allowance: { share: 0.1, processes: 2 }, timeoutMs: 250, barrierMs: 2000, offset: world.between(-1e6, 1e6), drift: world.between(-2e-4, 2e-4), net
  }))
  for (const p of processes) void p.grants.settled(0)
  const limits = { perMinute: 3000, perDay: 3000 * 50 }
  return { world, start, redis, processes, limits, ask: { limits, ban: null, cost: 1, monthLimit: 0, overage: false } }
}
