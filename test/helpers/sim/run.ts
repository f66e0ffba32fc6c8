// Runs one seeded schedule (schedules.ts) in a fresh world: N processes running the production
// Redis path against the modelled Redis, the load and the faults on the world's clock, then the
// checks (check.ts). `describe()` says what happened, for a failing seed's report.
import { createMemoryStore } from '../../../src/gateway/limiter/memory/store.js'
import { allowanceUnits, DEFAULT_OUTAGE_ALLOWANCE_PERCENT, type OutageAllowance } from '../../../src/gateway/limiter/redis/outage.js'
import { DEFAULT_BAN } from './schedules.js'
import { ideal, violations, type Limits, type Violation } from './check.js'
import { SimProcess, type Admission } from './process.js'
import { SimRedis, type LuaVm } from './redis-model.js'
import { dayKey, limiterKey } from '../../../src/gateway/redis/keys.js'
import { GRANT } from '../../../src/gateway/limiter/redis/scripts.js'
import { logGrants, lostUnits } from './failover.js'
import { SimCluster, singleRedis } from './topology.js'
import { makeSchedule, TIMING_FAMILIES, type Family, type Schedule, type TimingFamily } from './schedules.js'
import { makeTimingSchedule } from './timing-schedules.js'
import { makeClusterSchedule } from './cluster-schedules.js'
import { World } from './world.js'

export interface Report {
  readonly family: Family
  readonly seed: number
  readonly schedule: Schedule
  readonly violations: readonly Violation[]
  readonly requests: number
  readonly admitted: number
  /** Requests never answered by the end (a hung request). */
  readonly unanswered: number
  /** Steady schedules: how far below the exact log's admissions, in %. */
  readonly underPct: number | undefined
  /** Steady schedules: what the in-process store's ring admits of the same arrivals. */
  readonly reference: number | undefined
  readonly outcomes: Record<string, number>
  readonly scripts: number
  /** data-loss: when the windows are empty by truth again (virtual ms). */
  readonly freeAgainAt: number | undefined
  /** Per consumer, the most units over its limit the checker allowed (STORE_ON_ERROR=local's outage allowance). */
  readonly allowed: ReadonlyMap<string, number>
  /** Per consumer, the units a failover's lost writes had counted (the stated bound lets it go over by them too). */
  readonly lost: ReadonlyMap<string, number>
  /** Live processes still degraded at the end (a shard never recovered, or outage admissions never written back). */
  readonly degradedAtEnd: number
  /** One consumer's admissions, in time order. */
  admissionsOf: (consumer: string) => Admission[]
  /** Every refusal (its consumer, the instant of the answer, the outcome). */
  readonly refusals: ReadonlyArray<{ readonly consumer: string, readonly t: number, readonly outcome: string }>
  describe: () => string
}

/** How long a `reseedCut` waits for its grant call before it is dropped (the re-seeds come within milliseconds of the restart). */
const RESEED_CUT_WAIT_MS = 5_000

/** `node` dies (data kept) for `cut.ms` as the `cut.nth` grant call from now arrives, before running it. */
function killAtGrant (world: World, node: SimRedis, cut: { readonly nth: number, readonly ms: number }): void {
  let grants = 0
  const hook = (script: { sha: string }): void => {
    if (script.sha !== GRANT.sha || ++grants < cut.nth) return
    node.beforeScript = undefined
    if (node.kill()) world.at(world.now + cut.ms, () => { node.restart(true) })
  }
  node.beforeScript = hook
  world.at(world.now + RESEED_CUT_WAIT_MS, () => { if (node.beforeScript === hook) node.beforeScript = undefined })
}

/** After a restart and its barrier, the longest a live process may still take to have re-seeded (reconnection ≤ 500 ms, the epoch read). */
const RESEEDED_WITHIN_MS = 1_000

/** Schedules start in 2030, at a seeded instant of the year (so month boundaries come up). */
const YEAR_START = Date.UTC(2030, 0, 1)

/** A minute window's units ending at a violation, by how they were granted and which process granted them. */
function unitsBySource (admissions: readonly Admission[], violation: Violation): string {
  const units = new Map<string, number>()
  for (const a of admissions) {
    if (a.consumer !== violation.consumer || a.t > violation.at || a.t <= violation.at - 60_000) continue
    units.set(`${a.via}@${a.process}`, (units.get(`${a.via}@${a.process}`) ?? 0) + a.cost)
  }
  return [...units].sort((x, y) => x[0].localeCompare(y[0])).map(([source, n]) => `${source} ${n}`).join(', ')
}

/** Runs one schedule; `vm`: the Lua VM to run it in (one per test file, reused: each world has its own keyspace). */
export async function runSchedule (family: Family, seed: number, vm: LuaVm): Promise<Report> {
  const world = new World(seed, 0)
  const drawn = YEAR_START + Math.floor(world.random() * 360) * 86_400_000 + (world.chance(0.2) ? 86_400_000 * 28 - 30_000 : world.between(0, 86_400_000))
  world.now = drawn - 5000
  const schedule = family === 'cluster' || family === 'cluster-clock' || family === 'cluster-reseed'
    ? makeClusterSchedule(world, drawn, family)
    : TIMING_FAMILIES.includes(family as TimingFamily) ? makeTimingSchedule(world, family as TimingFamily, drawn) : makeSchedule(world, family, drawn)
  // A schedule may pick its own start (a month's end); nothing is queued yet, so the clock can move there.
  const start = schedule.start ?? drawn
  world.now = start - 5000
  // One Redis, or a Cluster's nodes (each its own clock: the schedule's skew plus the node's own).
  const nodes = (schedule.cluster?.nodeSkews ?? [0]).map((own) => new SimRedis(world, schedule.skew + own, vm))
  const redis = nodes[0]!
  const cluster = schedule.cluster === undefined ? undefined : new SimCluster(nodes)
  const topology = cluster ?? singleRedis(redis)
  for (const node of nodes) if (schedule.redisDrift !== undefined) node.setDrift(schedule.redisDrift)
  if (schedule.seasoned) for (const shard of topology.shards) topology.node(shard).set(topology.epochKey(shard), 'deployed,0')
  const processes: SimProcess[] = []
  // STORE_ON_ERROR=local's outage allowance: the schedule's, else the shipped share over the schedule's processes.
  const allowance: OutageAllowance = schedule.allowance ?? { share: DEFAULT_OUTAGE_ALLOWANCE_PERCENT / 100, processes: schedule.processes }
  const spawn = (i: number): SimProcess => new SimProcess(world, topology, `p${i}-${processes.length}`, {
    policy: schedule.policy,
    allowance,
    timeoutMs: schedule.timeoutMs,
    barrierMs: schedule.barrierMs,
    offset: world.between(-1e6, 1e6),
    drift: world.between(schedule.processDrift?.min ?? -2e-4, schedule.processDrift?.max ?? 2e-4),
    net: schedule.net
  })
  for (let i = 0; i < schedule.processes; i++) processes.push(spawn(i))
  const live = processes.slice()
  // Each process starts as a gateway does: its shard recovers (epoch read, barrier on a fresh Redis) before traffic.
  for (const p of live) void p.grants.settled(0)
  for (const a of schedule.arrivals) {
    const c = schedule.consumers[a.consumer]!
    world.at(a.t, () => {
      const p = live[a.process]!
      if (!p.dead) p.request(c.id, { limits: { perMinute: c.perMinute, perDay: c.perDay }, ban: c.ban, cost: a.cost, monthLimit: c.perMonth, overage: c.overage })
    })
  }
  // A failover's lost writes, per consumer: the units its windows held on the node and not on the replica.
  const lost = new Map<string, number>()
  for (const f of schedule.faults) {
    if (f.kind === 'failover') {
      // The replica's copy, `lagMs` behind the node when it fails (asynchronous replication).
      const replica = new SimRedis(world, nodes[f.node]!.skew, vm)
      const log = logGrants(world, nodes[f.node]!)
      // Replication runs `lagMs` behind: the calls the node ran since are lost (a call's reply may still be in flight).
      const since = f.at - f.lagMs
      world.at(since, () => { nodes[f.node]!.copyInto(replica) })
      world.at(f.at, () => {
        const node = nodes[f.node]!
        for (const c of schedule.consumers) {
          if (cluster?.indexOf(limiterKey(c.id)) !== f.node) continue
          lost.set(c.id, (lost.get(c.id) ?? 0) + lostUnits(world, vm, node, replica, log, since, c))
        }
        node.onScript = undefined
        if (node.state === 'paused') node.resume()
        if (node.kill()) world.at(world.now + f.downMs, () => { replica.copyInto(node); node.restart(true) })
      })
    }
  }
  // Each data loss: when, which node (a kill that finds its node already dead loses nothing more), when it came back.
  const losses: Array<{ readonly at: number, readonly node: SimRedis, backAt: number }> = []
  for (const f of schedule.faults) {
    const node = 'node' in f && f.node !== undefined ? nodes[f.node]! : redis
    world.at(f.at, () => {
      if (f.kind === 'failover') return
      if (f.kind === 'migrate') {
        const id = schedule.consumers[f.consumer]!.id
        cluster?.migrate([limiterKey(id), dayKey(id)], f.to)
      } else if (f.kind === 'pause') {
        node.pause()
        world.at(world.now + f.ms, () => { node.resume() })
      } else if (f.kind === 'kill') {
        // A kill of a server that is already dead does nothing; its first restart stands (a
        // second restart on a live server would wipe its data with every connection up: FLUSHALL,
        // which the invariant leaves out by design, docs/limiter-internals.md).
        if (node.state === 'paused') node.resume()
        if (node.kill()) {
          const loss = f.keepData ? undefined : { at: world.now, node, backAt: Infinity }
          if (loss !== undefined) losses.push(loss)
          world.at(world.now + f.ms, () => {
            node.restart(f.keepData)
            if (loss !== undefined) loss.backAt = world.now
            if (f.reseedCut !== undefined) killAtGrant(world, node, f.reseedCut)
          })
        }
      } else if (f.kind === 'reset') {
        live[f.process]!.reset()
      } else if (f.kind === 'stall') {
        live[f.process]!.stall(f.ms)
      } else if (f.kind === 'partition') {
        live[f.process]!.partition(f.ms)
      } else if (f.kind === 'slow') {
        if (f.onReserveDrop === true) live[f.process]!.slowWhen({ kind: 'reserve-drop' }, f.ms, f.delay)
        else if (f.onBacklog !== undefined) {
          // Every live process is armed; the first whose backlog Redis runs is slowed (`process` is not used).
          let claimed = false
          const claim = (): boolean => { if (claimed) return false; claimed = true; return true }
          for (const p of live) p.slowWhen({ kind: 'backlog', minRequests: f.onBacklog, claim }, f.ms, f.delay)
        }
        else live[f.process]!.slow(f.ms, f.delay)
      } else if (f.kind === 'clock') {
        redis.stepClock(f.ms)
      } else {
        // A fresh process takes its place at once, or `restartAfter` later (requests meanwhile find none).
        live[f.process]!.crash()
        const restart = (): void => {
          const fresh = spawn(f.process)
          processes.push(fresh)
          live[f.process] = fresh
          void fresh.grants.settled(0)
        }
        if (f.restartAfter === undefined) restart()
        else world.at(world.now + f.restartAfter, restart)
      }
    })
  }
  await world.run(start + schedule.duration + 10_000)

  // A process that crashed took its ledger with it: a loss of its consumers' Redis that it had not re-seeded when it
  // crashed — one after the crash, or one it was still recovering from — forgets what it admitted (outside the bound,
  // docs/limiter-internals.md). Every live process has re-seeded by the recovery barrier's end (the epoch mark is set
  // within a reconnection, ≤ 500 ms, of the restart: RESEEDED_WITHIN_MS more); a crash before then is taken as not
  // re-seeded. The checker leaves those admissions out of the windows that end at or after the loss: only what Redis
  // counted again (the other processes' re-seeded ledgers, and what came after) is held to the limit there.
  const forgottenAt = (p: SimProcess, consumer: string): number | undefined => {
    const crashedAt = p.crashedAt
    if (crashedAt === undefined) return undefined
    const node = topology.node(topology.nodeOf(limiterKey(consumer)))
    return losses.find((loss) => loss.node === node && crashedAt < loss.backAt + schedule.barrierMs + RESEEDED_WITHIN_MS)?.at
  }
  const admissions = processes.flatMap((p) => p.admissions.map((a) => {
    const at = forgottenAt(p, a.consumer)
    return at === undefined ? a : { ...a, forgottenAt: at }
  }))
  const limits = new Map<string, Limits>(schedule.consumers.map((c) => [c.id, { perMinute: c.perMinute, perDay: c.perDay, perMonth: c.overage ? 0 : c.perMonth }]))
  // Under `local` a consumer may go over by the allowance of every process that ran (a crashed one's uncounted
  // admissions are gone with it, its replacement has its own): the checker is told that bound, per consumer.
  const allowed = new Map<string, number>(schedule.policy === 'local' ? schedule.consumers.map((c) => [c.id, allowanceUnits(allowance, c.perMinute) * processes.length]) : [])
  // By Redis's clock where it drifts or steps (what the limiter's windows are), else by the world's.
  const byRedis = schedule.checkBy?.clock === 'redis'
  const checked = byRedis ? admissions.map((a) => ({ ...a, t: a.redisT })) : admissions
  const found = schedule.policy === 'open' ? [] : violations(checked, limits, allowed, schedule.checkBy?.slackMs ?? 0, lost)
  const outcomes: Record<string, number> = {}
  for (const p of processes) for (const [k, v] of p.outcomes) outcomes[k] = (outcomes[k] ?? 0) + v
  let underPct: number | undefined
  let reference: number | undefined
  if (schedule.steady) {
    const c = schedule.consumers[0]!
    const best = ideal(schedule.arrivals.map((a) => a.t), c.perMinute)
    underPct = 100 * (best - admissions.length) / best
    // The ring is given the same requests at the instants they would have reached Redis with no wait in the limiter
    // (process.ts reachedRedisAt: arrival plus the network's delay): a request the network brought there a millisecond
    // later may fall in the next second's bucket, for the ring as for Redis. Everything the limiter adds — a turn's
    // wait, a call held, a late reply given back and asked again — is the Redis path's own, and shows against the ring.
    const reached = [...admissions.map((a) => a.reachedRedisAt), ...processes.flatMap((p) => p.refusals.flatMap((r) => r.reachedRedisAt === undefined ? [] : [r.reachedRedisAt]))].sort((x, y) => x - y)
    let clock = 0
    const ring = createMemoryStore({ now: () => clock })
    reference = 0
    for (const at of reached) {
      clock = at
      if ((await ring.consume(c.id, { limits: { perMinute: c.perMinute, perDay: c.perDay }, ban: null, cost: 1, monthLimit: 0, overage: false })).outcome === 'ok') reference++
    }
  }
  const unanswered = processes.filter((p) => !p.dead).reduce((n, p) => n + p.waiting, 0)
  return {
    family,
    seed,
    schedule,
    violations: found,
    requests: schedule.arrivals.length,
    admitted: admissions.length,
    unanswered,
    underPct,
    reference,
    outcomes,
    scripts: nodes.reduce((n, node) => n + node.scripts, 0),
    lost,
    freeAgainAt: schedule.freeAgainAt,
    allowed,
    degradedAtEnd: processes.filter((p) => !p.dead && p.grants.degraded()).length,
    admissionsOf: (consumer) => admissions.filter((a) => a.consumer === consumer).sort((a, b) => a.t - b.t),
    refusals: processes.flatMap((p) => p.refusals),
    describe () {
      const lines = [
        `family ${family}, seed ${seed}: ${schedule.processes} processes, STORE_ON_ERROR=${schedule.policy}, timeout ${schedule.timeoutMs} ms, barrier ${schedule.barrierMs} ms, Redis skew ${schedule.skew.toFixed(0)} ms${schedule.redisDrift === undefined ? '' : `, Redis drift ${(schedule.redisDrift * 1e6).toFixed(0)} ppm`}, ${schedule.seasoned ? 'seasoned' : 'fresh'} Redis, ${(schedule.duration / 1000).toFixed(0)} s from ${new Date(start).toISOString()}${schedule.checkBy === undefined ? '' : `, checked by ${byRedis ? 'Redis\'s' : 'the world\'s'} clock (windows ${schedule.checkBy.slackMs.toFixed(0)} ms shorter)`}`,
        `consumers: ${schedule.consumers.map((c) => `${c.id} ${c.perMinute}/min ${c.perDay}/day${c.perMonth > 0 ? ` ${c.perMonth}/month${c.overage ? ' (overage)' : ''}` : ''}${c.ban === null ? '' : c.ban === DEFAULT_BAN ? ' ban' : ` ban@${c.ban.threshold}`}`).join(', ')}`,
        `faults: ${schedule.faults.map((f) => `${f.kind}@${((f.at - start) / 1000).toFixed(2)}s${'ms' in f ? ` ${f.ms.toFixed(0)}ms` : ''}${'process' in f ? ` p${f.process}` : ''}${f.kind === 'kill' ? (f.keepData ? ' kept' : ' lost') : ''}${'node' in f && f.node !== undefined ? ` n${f.node}` : ''}${f.kind === 'failover' ? ` lag ${f.lagMs.toFixed(0)}ms down ${f.downMs.toFixed(0)}ms` : ''}${f.kind === 'migrate' ? ` k${f.consumer}→n${f.to}` : ''}`).join(', ') || 'none'}`,
        `requests ${schedule.arrivals.length}, outcomes ${JSON.stringify(outcomes)}, unanswered ${unanswered}, scripts ${nodes.reduce((n, node) => n + node.scripts, 0)}`,
        ...(schedule.cluster === undefined ? [] : [`Cluster of ${nodes.length} nodes (own skews ${schedule.cluster.nodeSkews.map((x) => x.toFixed(1)).join(', ')} ms); consumers' nodes at the end: ${schedule.consumers.map((c) => `${c.id} n${cluster!.indexOf(limiterKey(c.id))}`).join(', ')}${lost.size > 0 ? `; lost by a failover: ${[...lost].map(([id, n]) => `${id} ${n}`).join(', ')} units (allowed over)` : ''}`]),
        ...schedule.consumers.flatMap((c) => {
          const forgotten = admissions.filter((a) => a.consumer === c.id && a.forgottenAt !== undefined)
          return forgotten.length === 0 ? [] : [`forgotten: ${c.id} ${forgotten.reduce((n, a) => n + a.cost, 0)} units a crashed process admitted, by the loss at ${((forgotten[0]!.forgottenAt! - start) / 1000).toFixed(2)} s (left out of the windows ending after it)`]
        }),
        ...found.map((v) => `OVER: ${v.consumer} ${v.units} units in a ${v.window} (limit ${v.limit}) ending at ${((v.at - start) / 1000).toFixed(3)} s; the minute before it by source and process: ${unitsBySource(checked, v)}`)
      ]
      return lines.join('\n')
    }
  }
}
