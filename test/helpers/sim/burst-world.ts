// A fresh consumer's burst (4/3 of its minute limit) across two or three gateway processes on one modelled Redis,
// with each process's event loop blocked now and then around second boundaries (by Redis's clock): the load under
// which a holder's give-back of its block reaches Redis late (docs/limiter-internals.md, "What a block could
// strand"). Used by the burst families in test/gateway/limiter/simulation/; everything is drawn from the seed.
import { randomInt } from 'node:crypto'
import type { BanPolicy } from '../../../src/gateway/config/types.js'
import { BLOCK_HELD_BUCKETS } from '../../../src/gateway/limiter/redis/layout.js'
import { limiterKey } from '../../../src/gateway/redis/keys.js'
import { violations } from './check.js'
import { SimProcess } from './process.js'
import { type createLuaVm, SimRedis } from './redis-model.js'
import { singleRedis } from './topology.js'
import { World } from './world.js'

const YEAR_START = Date.UTC(2030, 0, 1)

/** The load: how many processes, and the stalls around each second boundary. */
export interface BurstLoad {
  /** The processes, drawn from [min, max]. */
  readonly processes: readonly [number, number]
  /** The burst's arrivals spread over up to this long (ms). */
  readonly spreadMs: number
  /** Chance the burst moves from the first process to the last as it goes on (else it is even over them). */
  readonly movingChance: number
  /** A stall's length (ms), drawn from [min, max). */
  readonly stallMs: readonly [number, number]
  /** Where a stall starts, relative to the boundary (ms; negative: before it), drawn from [min, max). */
  readonly stallStart: readonly [number, number]
  /** Chance a process stalls around a given boundary. */
  readonly stallChance: number
  /** Chance a stall is followed at once by a second one (drawn the same way). */
  readonly twiceChance: number
  /** No stall starts within this long of the end of the process's last one. */
  readonly gapMs: number
  /** Boundaries with stalls, from the burst's first second on. */
  readonly seconds: number
  /** The minute limit, drawn from [min, max) (default [60, 401)). */
  readonly limit?: readonly [number, number]
  /** The consumer's ban policy (default none; the real burst's Pro key: PRO_BAN). */
  readonly ban?: BanPolicy
  /** Now and then a message takes this much longer (ms, drawn from [min, max)), with this chance (default never). */
  readonly slow?: { readonly chance: number, readonly ms: readonly [number, number] }
  /** The burst starts this far into a second of Redis's clock (ms, drawn from [min, max); default anywhere). */
  readonly startInSecond?: readonly [number, number]
  /**
   * One holder stalled across the end of the burst's first second: process p0's loop blocked from `start` ms after the
   * burst's first arrival (drawn from [min, max): while it holds a block) for `ms` (drawn from [min, max)), its block's
   * give-back as late as that.
   */
  readonly holder?: { readonly start: readonly [number, number], readonly ms: readonly [number, number] }
  /**
   * The burst in two waves instead of spread: p0's share (a fraction of the requests, drawn from [min, max)) over the
   * first `firstOverMs` (drawn from [min, max)), the rest evenly over the other processes all at once `othersAfterMs`
   * after the burst's start (drawn from [min, max)): p0 takes blocks its wave leaves unspent, and every refusal
   * elsewhere comes in one call, in the burst's first second.
   */
  readonly waves?: { readonly share: readonly [number, number], readonly firstOverMs: readonly [number, number], readonly othersAfterMs: readonly [number, number] }
  /**
   * A reserve held through the burst, then spent (grant.lua's spared refusals, docs/decisions.md §3), instead of the
   * spread burst: p0 busy at `rate` requests a second (drawn from [min, max)) for `leadMs` before the burst's second,
   * so Redis keeps a reserve back for it; at that second's start (3–30 ms into it, past its pool) p0 sends one more
   * request and its loop stalls for `stallMs` right after, so that call times out and p0 answers what reached it
   * meanwhile — as many requests as its reserve, less one — from the reserve; while it is stalled, the other processes'
   * burst fills the room left and `excess` × the reserve more (drawn from [min, max)): refusals spared while the
   * reserve is kept back; once p0 runs again and its shard is back, `tail` more of its requests (drawn from [min, max))
   * over `tailOverMs`, `tailAfterMs` after the stall's end, refused once its reserve is written back (spent).
   */
  readonly reserveHolder?: {
    readonly rate: readonly [number, number]
    readonly leadMs: readonly [number, number]
    readonly stallMs: readonly [number, number]
    readonly excess: readonly [number, number]
    readonly tail: readonly [number, number]
    readonly tailAfterMs: readonly [number, number]
    readonly tailOverMs: readonly [number, number]
  }
}

/** The ban policy of the plans (config/plans.yaml): more than 30 429s a minute bans the key for 15 minutes. */
export const PRO_BAN: BanPolicy = { threshold: 30, windowSeconds: 60, durationSeconds: 900, maxDurationSeconds: 86_400 }

export interface BurstOutcome {
  readonly limit: number
  readonly requests: number
  readonly admitted: number
  /** The most units over the limit in any rolling window (0: never over). */
  readonly over: number
  readonly unanswered: number
  /** The longest a request waited for its answer (virtual ms, from its arrival). */
  readonly longestWait: number
  /** The same less the time its process's loop was blocked meanwhile. */
  readonly longestUnblockedWait: number
  /** The longest stall drawn. */
  readonly longestStall: number
  readonly refused: Record<string, number>
  /** Bans started (a reply's ban_started). */
  readonly bans: number
  /**
   * Units given back once their bucket was BLOCK_HELD_BUCKETS seconds old (a holder stalled past its block's lifetime):
   * no refusal waits that long for them, so a burst may be short by as many (an upper bound: it also counts the
   * give-back of requests admitted too late to spend, which ask again).
   */
  readonly lateGiveBack: number
  readonly describe: string
}

/** One schedule of the burst under `load`. */
export async function runBurst (seed: number, vm: Awaited<ReturnType<typeof createLuaVm>>, load: BurstLoad): Promise<BurstOutcome> {
  const world = new World(seed, 0)
  const start = YEAR_START + Math.floor(world.random() * 360) * 86_400_000 + world.between(0, 86_400_000)
  world.now = start - 5000
  const skew = world.between(-300, 300)
  const redis = new SimRedis(world, skew, vm)
  redis.set('rl:{#epoch}', 'deployed,0')
  // Give-backs that reach Redis once their bucket is BLOCK_HELD_BUCKETS seconds old: past the block's lifetime, so past
  // every wait for it (a holder stalled that long). Each adjustment 'minuteBucket,dayBucket,month,delta' of a grant
  // call with a negative delta gives back units counted in that second.
  let lateGiveBack = 0
  redis.onScript = (_script, _keys, args, reply) => {
    const redisNow = Array.isArray(reply) ? Number(reply[0]) : NaN
    if (!Number.isFinite(redisNow)) return
    const bucket = Math.floor(redisNow / 1000)
    for (const arg of args) {
      for (const match of arg.matchAll(/(?:^|;)(\d+),\d+,\d+,-(\d+)(?=;|$)/g)) {
        if (Number(match[1]) <= bucket - BLOCK_HELD_BUCKETS) lateGiveBack += Number(match[2])
      }
    }
  }
  const net = { base: world.between(0.05, 1), jitter: world.between(0, 1), slowChance: 0, slowMs: 0 }
  if (load.slow !== undefined) { net.slowChance = load.slow.chance; net.slowMs = world.between(load.slow.ms[0], load.slow.ms[1]) }
  const count = load.processes[0] + Math.floor(world.random() * (load.processes[1] - load.processes[0] + 1))
  const processes = Array.from({ length: count }, (_, i) => new SimProcess(world, singleRedis(redis), `p${i}`, {
    policy: 'local', timeoutMs: 250, barrierMs: 2000, offset: world.between(-1e6, 1e6), drift: world.between(-2e-4, 2e-4), net
  }))
  for (const p of processes) void p.grants.settled(0)
  const limit = Math.floor(world.between(load.limit?.[0] ?? 60, load.limit?.[1] ?? 401))
  const ask = { limits: { perMinute: limit, perDay: limit * 10 }, ban: load.ban ?? null, cost: 1, monthLimit: 0, overage: false }
  // Spread over up to `load.spreadMs` from anywhere in a second: even over the processes, or moving from the first to the last.
  const spread = world.between(50, load.spreadMs)
  let from = start + world.between(0, 1000)
  if (load.startInSecond !== undefined) from = Math.ceil((from + skew) / 1000) * 1000 - skew + world.between(load.startInSecond[0], load.startInSecond[1])
  const moving = world.chance(load.movingChance)
  let requests = load.reserveHolder === undefined ? Math.ceil(limit * 4 / 3) : 0
  const spreadBurst = load.waves === undefined && load.reserveHolder === undefined
  const holding: string[] = []
  if (load.reserveHolder !== undefined) {
    const shape = load.reserveHolder
    const holder = processes[0]!
    const rate = world.between(shape.rate[0], shape.rate[1])
    const lead = world.between(shape.leadMs[0], shape.leadMs[1])
    const second = Math.ceil((from + lead + skew) / 1000) * 1000 - skew // the burst's second starts (Redis's clock)
    for (let at = second - lead; at < second - 20; at += world.between(0.5, 1.5) * 1000 / rate) {
      requests++
      world.at(at, () => { holder.request('burst', ask) })
    }
    const callAt = second + world.between(3, 30)
    const stallMs = world.between(shape.stallMs[0], shape.stallMs[1])
    const excess = world.between(shape.excess[0], shape.excess[1])
    const drawnTail = Math.floor(world.between(shape.tail[0], shape.tail[1]))
    const tailAt = callAt + stallMs + world.between(shape.tailAfterMs[0], shape.tailAfterMs[1])
    const tailOver = world.between(shape.tailOverMs[0], shape.tailOverMs[1])
    const burstAt = callAt + world.between(50, 300)
    const burstOver = world.between(50, 400)
    requests++
    world.at(callAt, () => { holder.request('burst', ask) })
    // p0 stalled right after that call left (it times out); the rest sized by the reserve Redis kept for p0 before and
    // after running it (read off the wire): p0 may spend the lower figure (the reserve's cap while the call is in
    // flight), the others find the room left by what Redis keeps after it.
    let before = 0
    world.at(callAt + 0.01, () => { holder.stall(stallMs); before = holder.reserveSeen(limiterKey('burst')) })
    world.at(callAt + 5, () => {
      const kept = holder.reserveSeen(limiterKey('burst'))
      const spendable = Math.min(before, kept)
      const used = processes.reduce((n, p) => n + p.admissions.length, 0) + 1
      const spared = Math.ceil(spendable * excess)
      const others = Math.max(0, limit - used - kept) + spared
      // Enough refusals in all that the ban must start once the reserve is spent: more than the threshold, with a
      // margin of 3 for what `used` cannot see (a timed-out call's request may be counted twice, the others' room is 1
      // or 2 less; 4 of 600 schedules refused exactly 30 without it).
      const tail = Math.max(drawnTail, (load.ban?.threshold ?? 0) + 4 - spared)
      requests += others + Math.max(0, spendable - 1) + tail
      holding.push(`p0 at ${rate.toFixed(1)}/s for ${lead.toFixed(0)} ms, ${used} used, reserve ${before} → ${kept}, stalled ${stallMs.toFixed(0)} ms; ${others} from the others at ${(burstAt - callAt).toFixed(0)} ms over ${burstOver.toFixed(0)} ms; p0's tail ${tail}`)
      for (let i = 0; i < others; i++) world.at(burstAt + burstOver * i / others, () => { processes[1 + (i % (count - 1))]!.request('burst', ask) })
      for (let i = 1; i < spendable; i++) world.at(callAt + 6 + (stallMs - 8) * i / spendable, () => { holder.request('burst', ask) })
      for (let i = 0; i < tail; i++) world.at(tailAt + tailOver * i / tail, () => { holder.request('burst', ask) })
    })
  }
  if (load.waves !== undefined) {
    const first = Math.floor(requests * world.between(load.waves.share[0], load.waves.share[1]))
    const over = world.between(load.waves.firstOverMs[0], load.waves.firstOverMs[1])
    const after = world.between(load.waves.othersAfterMs[0], load.waves.othersAfterMs[1])
    for (let i = 0; i < requests; i++) {
      const index = i < first ? 0 : 1 + (i % (count - 1))
      world.at(from + (i < first ? over * i / first : after), () => { processes[index]!.request('burst', ask) })
    }
  }
  for (let i = 0; i < (spreadBurst ? requests : 0); i++) {
    const at = world.between(0, spread)
    const index = moving ? Math.min(count - 1, Math.floor(world.between(0, 1) * 0.5 + (at / spread) * count)) : i % count
    world.at(from + at, () => { processes[index]!.request('burst', ask) })
  }
  // Load: each process's loop blocked around second boundaries (by Redis's clock): one stall, or two back to back (a
  // loaded loop), never starting within `load.gapMs` of the end of its last (the loop runs its timers in between).
  const stalls: string[] = []
  let longestStall = 0
  const freeAt = processes.map(() => -Infinity)
  for (let second = 0; second < load.seconds; second++) {
    for (const [i, p] of processes.entries()) {
      if (!world.chance(load.stallChance)) continue
      const boundary = Math.ceil((from + skew) / 1000) * 1000 + second * 1000 - skew
      const at = boundary + world.between(load.stallStart[0], load.stallStart[1])
      let ms = world.between(load.stallMs[0], load.stallMs[1])
      if (world.chance(load.twiceChance)) ms += world.between(load.stallMs[0], load.stallMs[1])
      if (at < freeAt[i]! + load.gapMs) continue
      freeAt[i] = at + ms
      longestStall = Math.max(longestStall, ms)
      stalls.push(`p${i}@${(at - from).toFixed(0)}ms ${ms.toFixed(0)}ms`)
      world.at(at, () => { p.stall(ms) })
    }
  }
  if (load.holder !== undefined) {
    const at = from + world.between(load.holder.start[0], load.holder.start[1])
    const ms = world.between(load.holder.ms[0], load.holder.ms[1])
    longestStall = Math.max(longestStall, ms)
    stalls.push(`p0@${(at - from).toFixed(0)}ms ${ms.toFixed(0)}ms (holder)`)
    world.at(at, () => { processes[0]!.stall(ms) })
  }
  await world.run(from + (load.reserveHolder === undefined ? 15_000 : 20_000))
  const admissions = processes.flatMap((p) => p.admissions)
  const found = violations(admissions, new Map([['burst', { perMinute: limit, perDay: limit * 10, perMonth: 0 }]]))
  const refused: Record<string, number> = {}
  for (const p of processes) for (const r of p.refusals) refused[r.outcome] = (refused[r.outcome] ?? 0) + 1
  const bans = processes.reduce((n, p) => n + p.bansStarted, 0)
  return {
    limit,
    requests,
    admitted: admissions.length,
    over: found.reduce((n, v) => Math.max(n, v.units - v.limit), 0),
    unanswered: processes.reduce((n, p) => n + p.waiting, 0),
    longestWait: processes.reduce((n, p) => Math.max(n, p.longestWait), 0),
    longestUnblockedWait: processes.reduce((n, p) => Math.max(n, p.longestUnblockedWait), 0),
    longestStall,
    refused,
    bans,
    lateGiveBack,
    describe: `seed ${seed}: ${requests} requests on ${limit}/min at ${count} processes over ${spread.toFixed(0)} ms (${moving ? 'moving' : 'even'}), stalls ${stalls.join(', ') || 'none'}${holding.length > 0 ? `, ${holding.join('')}` : ''}, refused ${JSON.stringify(refused)}${load.ban !== undefined ? `, ${bans} ban(s) started` : ''}${lateGiveBack > 0 ? `, ${lateGiveBack} units given back past the block's lifetime` : ''}`
  }
}

/**
 * The seeds of a burst family's run: SIM_SEED replays one, SIM_SEEDS_FROM a whole run, else `count` fresh ones from a
 * random base. `say` is told the range and how to replay it.
 */
export function burstSeeds (count: number, say: (line: string) => void): number[] {
  const base = process.env.SIM_SEEDS_FROM !== undefined ? Number(process.env.SIM_SEEDS_FROM) : randomInt(1, 2 ** 40)
  const seeds = process.env.SIM_SEED !== undefined ? [Number(process.env.SIM_SEED)] : Array.from({ length: count }, (_, i) => base + i)
  say(`seeds ${seeds[0]}…${seeds[seeds.length - 1]} (replay: SIM_SEEDS_FROM=${seeds[0]} or SIM_SEED=<seed>)`)
  return seeds
}
