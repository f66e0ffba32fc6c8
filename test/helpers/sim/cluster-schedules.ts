// The `cluster` family: the limiter on a Redis Cluster of 2–4 nodes (topology.ts), 3–6 consumers at
// 0.5–3 × their minute limits spread over the nodes' slots for 80–110 s, each node with its own
// clock (the same, or 5–50 ms apart), in one of three kinds of schedule:
// - `node-faults`: nodes paused, or killed with their data kept or lost (SIM_CLUSTER_LOSS=0: kept
//   always), one at a time or together — inside the
//   invariant (each shard has its own state, clock, epoch mark and re-seed): checked exactly;
// - `failover`: a node fails over to a replica that missed its last 10 ms–1 s of acknowledged writes
//   while the epoch mark survives, so no process re-seeds — outside the invariant (docs/limiter-internals.md
//   lists it): checked against its stated bound, each consumer of that node over by at most the units the
//   lost writes had counted (failover.ts);
// - `migration`: consumers' slots migrate to other nodes (their keys move with their data; clients follow
//   MOVED) while a process keeps each account on the shard it was created on — its state, its epoch mark
//   and its clock bound, which then learns from another node's clock: to the account, a step of Redis's
//   clock by the nodes' difference. Outside the invariant: checked against the bound of such a step,
//   every window shortened by the nodes' clock spread. (A data loss on the node a slot migrated to is
//   not re-seeded for it at all: outside any bound, and not run.)
// Every schedule also has late and early bursts on the second edges of the node a consumer is on (by
// that node's clock), a minute apart, and one consumer built for them on the node furthest ahead: a
// pool spent past its second by a bound learnt from another node's clock shows there.
// `cluster-clock` (29 Nov) is aimed at that alone: 2–3 nodes 20–50 ms apart, node 0 — the shard each process
// meets first — furthest behind, the edge consumer on the node furthest ahead, 1–2 other consumers and one on node 0
// busy all along on the edge consumer's hot process, no faults (checked exactly). In `cluster` a clock shared by
// the shards failed about one schedule in five: none when the nodes' clocks agree (a fifth of them), and only while
// the process that spends the edge consumer's pools keeps hearing a node behind the one that consumer is on.
import { limiterKey } from '../../../src/gateway/redis/keys.js'
import type { StoreOnError } from '../../../src/gateway/limiter/redis/outage.js'
import type { World } from './world.js'
import { boundary, int, net, pick, type Arrival, type Consumer, type Fault, type Schedule } from './schedules.js'
import { atLimit, minuteConsumer, stream } from './timing-schedules.js'
import calculateSlot from 'cluster-key-slot'

export type ClusterKind = 'node-faults' | 'failover' | 'migration'
export type ClusterFamily = 'cluster' | 'cluster-clock' | 'cluster-reseed'

const SLOTS = 16_384

/**
 * Node kills lose their data in 60 % of them (the re-seed then runs per slot); SIM_CLUSTER_LOSS=0 keeps
 * the data always (how the family ran before the re-seed was fixed: docs/simulator.md, "Found in the real code").
 */
const withLoss = process.env.SIM_CLUSTER_LOSS !== '0'

export function makeClusterSchedule (w: World, start: number, family: ClusterFamily = 'cluster'): Schedule {
  if (family === 'cluster-reseed') return reseedSchedule(w, start)
  const aimed = family === 'cluster-clock'
  const skew = w.between(-5000, 5000)
  const base = { family, policy: 'local' as StoreOnError, timeoutMs: 250, barrierMs: 2000, net: net(w), skew, seasoned: w.chance(0.7), steady: false }
  const nodes = aimed ? int(w, 2, 3) : int(w, 2, 4)
  const spread = aimed ? w.between(20, 50) : w.chance(0.2) ? 0 : w.between(5, 50)
  const nodeSkews = Array.from({ length: nodes }, () => w.between(-spread / 2, spread / 2))
  // cluster-clock: node 0, whose shard every process meets first (it learns that node's clock first), furthest behind.
  if (aimed) nodeSkews.sort((a, b) => a - b)
  const processes = int(w, 2, 3)
  const duration = w.between(80_000, 110_000)
  const end = start + duration
  const consumers: Consumer[] = Array.from({ length: aimed ? int(w, 1, 2) : int(w, 3, 6) }, (_, i) => minuteConsumer(w, `k${i}`, int(w, 10, 90)))
  const nodeOf = (id: string): number => Math.floor(calculateSlot(limiterKey(id)) * nodes / SLOTS)
  const arrivals: Arrival[] = []
  consumers.forEach((c, i) => {
    arrivals.push(...atLimit(w, i, c, { start, skew: skew + nodeSkews[nodeOf(c.id)]!, end, processes }, false))
    // Late bursts just after second edges of the consumer's node (as late as the nodes' spread), early ones a minute later.
    const edge = (k: number): number => boundary(start, skew + nodeSkews[nodeOf(c.id)]!, k)
    const first = int(w, 2, Math.max(2, Math.floor(duration / 1000) - 68))
    for (let k = first; k < first + int(w, 3, 6); k++) {
      const at = int(w, 0, processes - 1)
      for (let j = int(w, 1, 4); j > 0; j--) arrivals.push({ t: edge(k) + w.between(0.5, Math.max(1, spread)), process: at, consumer: i, cost: 1 })
      const early = int(w, 0, processes - 1)
      for (let j = int(w, 1, Math.max(1, Math.ceil(c.perMinute / 8))); j > 0; j--) arrivals.push({ t: edge(k + 60) + w.between(0, 0.5), process: early, consumer: i, cost: 1 })
    }
  })
  // One consumer more, on the node whose clock is furthest ahead (where a bound learnt from another node's clock lags
  // most): hot on one process (3–6/s) for the seconds of its late bursts, so it holds pools at their ends, with room
  // (120–300/min, quiet before), then brought to its limit, and early bursts a minute later.
  const ahead = nodeSkews.indexOf(Math.max(...nodeSkews))
  const edgeId = Array.from({ length: 64 }, (_, n) => `e${n}`).find((id) => nodeOf(id) === ahead) ?? 'e0'
  const edgeConsumer = { id: edgeId, perMinute: int(w, 120, 300), perDay: 100_000, perMonth: 0, overage: false, ban: null }
  const e = consumers.push(edgeConsumer) - 1
  const edgeAt = (k: number): number => boundary(start, skew + nodeSkews[ahead]!, k)
  const firstLate = int(w, 4, 8)
  const lates = int(w, 4, 8)
  const hot = int(w, 0, processes - 1)
  arrivals.push(...stream(w, e, edgeAt(firstLate) - 3000, edgeAt(firstLate + lates), w.between(3, 6), processes, hot))
  arrivals.push(...stream(w, e, edgeAt(firstLate) - 3000, Math.min(end, edgeAt(firstLate + 60 + lates) + 1000), w.between(1.5, 3) * edgeConsumer.perMinute / 60, processes))
  for (let k = firstLate; k < firstLate + lates; k++) {
    for (let j = int(w, 1, 3); j > 0; j--) arrivals.push({ t: edgeAt(k) + w.between(0.5, Math.max(1, spread)), process: hot, consumer: e, cost: 1 })
    const early = int(w, 0, processes - 1)
    for (let j = int(w, Math.ceil(edgeConsumer.perMinute / 20), Math.ceil(edgeConsumer.perMinute / 8)); j > 0; j--) arrivals.push({ t: edgeAt(k + 60) + w.between(0, 0.5), process: early, consumer: e, cost: 1 })
  }
  const kind = pick<ClusterKind>(w, ['node-faults', 'failover', 'migration'])
  const faults: Fault[] = []
  if (aimed) {
    // A consumer on node 0, far below its limit, busy on the edge consumer's hot process all along: that process
    // keeps hearing node 0's clock, the furthest behind, so a bound shared by the shards lags node `ahead`'s by the spread.
    const behindId = Array.from({ length: 64 }, (_, n) => `b${n}`).find((id) => nodeOf(id) === 0) ?? 'b0'
    const behind = consumers.push({ id: behindId, perMinute: 3_000, perDay: 1_000_000, perMonth: 0, overage: false, ban: null }) - 1
    arrivals.push(...stream(w, behind, start, end, w.between(4, 8), processes, hot))
    return { ...base, processes, consumers, arrivals, faults, duration, cluster: { nodeSkews } }
  }
  const at = (): number => start + w.between(5_000, duration - 10_000)
  if (kind === 'node-faults') {
    for (let n = int(w, 1, 3); n > 0; n--) {
      const node = int(w, 0, nodes - 1)
      const keepData = !withLoss || w.chance(0.4)
      faults.push(w.chance(0.3) ? { kind: 'pause', at: at(), ms: w.between(20, 400), node } : { kind: 'kill', at: at(), ms: w.chance(0.5) ? w.between(20, 400) : w.between(400, 3000), keepData, node })
    }
    return { ...base, processes, consumers, arrivals, faults, duration, cluster: { nodeSkews } }
  }
  if (kind === 'failover') {
    faults.push({ kind: 'failover', at: at(), node: int(w, 0, nodes - 1), lagMs: w.between(10, 1000), downMs: w.between(500, 3000) })
    return { ...base, processes, consumers, arrivals, faults, duration, cluster: { nodeSkews } }
  }
  // Migrations: a consumer's slot to another node, now and then back; a node killed with its data kept now and then.
  for (let n = int(w, 1, 3); n > 0; n--) faults.push({ kind: 'migrate', at: at(), consumer: int(w, 0, consumers.length - 1), to: int(w, 0, nodes - 1) })
  if (w.chance(0.3)) faults.push({ kind: 'kill', at: at(), ms: w.between(20, 1000), keepData: true, node: int(w, 0, nodes - 1) })
  const spreadMs = Math.max(...nodeSkews) - Math.min(...nodeSkews)
  return { ...base, processes, consumers, arrivals, faults, duration, cluster: { nodeSkews }, checkBy: { clock: 'world', slackMs: spreadMs } }
}

/**
 * `cluster-reseed`: 3–6 consumers at their limits, all on one node of 2–3, and that node killed once with its data lost
 * (20 ms–3 s) 5 s in or later, over at least 17 s before the end: every live process re-seeds what it admitted there,
 * accounts of several slots of one node. Checked exactly, and every node back by the end.
 */
function reseedSchedule (w: World, start: number): Schedule {
  const skew = w.between(-5000, 5000)
  const nodes = int(w, 2, 3)
  const nodeSkews = Array.from({ length: nodes }, () => w.between(-10, 10))
  const processes = int(w, 2, 3)
  const duration = w.between(50_000, 70_000)
  const end = start + duration
  const node = int(w, 0, nodes - 1)
  const nodeOf = (id: string): number => Math.floor(calculateSlot(limiterKey(id)) * nodes / SLOTS)
  const ids = Array.from({ length: 256 }, (_, n) => `r${n}`).filter((id) => nodeOf(id) === node)
  const consumers: Consumer[] = ids.slice(0, int(w, 3, 6)).map((id) => minuteConsumer(w, id, int(w, 10, 90)))
  const arrivals: Arrival[] = consumers.flatMap((c, i) => atLimit(w, i, c, { start, skew: skew + nodeSkews[node]!, end, processes }, false))
  const faults: Fault[] = [{ kind: 'kill', at: start + w.between(5_000, duration - 20_000), ms: w.between(20, 3000), keepData: false, node }]
  return { family: 'cluster-reseed', policy: 'local', timeoutMs: 250, barrierMs: 2000, net: net(w), skew, seasoned: w.chance(0.7), steady: false, processes, consumers, arrivals, faults, duration, cluster: { nodeSkews } }
}
