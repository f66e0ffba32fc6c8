// The limiter on a simulated Redis Cluster (test/helpers/sim/cluster-schedules.ts): 2–4 nodes, each
// its own keyspace, clock and faults; consumers spread over their slots. Node pauses and kills (data
// kept or lost) are inside the invariant and checked exactly; a failover to a replica that missed
// acknowledged writes (epoch mark kept) and slot migrations are outside it and checked against their
// stated bounds (docs/simulator.md). Every request is answered. Two families aimed at what `cluster` finds
// only now and then: each shard's own clock bound (`cluster-clock`) and the re-seed of one node's accounts
// of several slots (`cluster-reseed`). TEST_LONG=1 runs five times as many.
import t, { type Test } from 'tap'
import type { Report } from '../../../helpers/sim/run.js'
import { runFamilies } from '../../../helpers/sim/suite.js'

/**
 * Every fault is over at least 17 s before the run ends: by then each process has every node back (a re-seed that can
 * never succeed — CROSSSLOT — leaves its node down for good while the outage policy answers).
 */
function everyNodeBack (t: Test, r: Report): void {
  t.ok(r.degradedAtEnd === 0, `every process has every node back by the end (${r.degradedAtEnd} still degraded)`)
}

await runFamilies(t, 'test/gateway/limiter/simulation/cluster.test.ts', [
  // 15 by default (20 before): clock-shared-by-shards fails ~20 % of them, reseed-across-slots ~13 % (docs/simulator.md).
  { family: 'cluster', count: 15, longCount: 100, check: everyNodeBack },
  // Aimed at each shard's own clock bound (cluster-schedules.ts): no faults, the nodes 20–50 ms apart.
  { family: 'cluster-clock', count: 10, longCount: 50 },
  // Aimed at the re-seed of one node's accounts, of several slots, after it lost its data.
  { family: 'cluster-reseed', count: 6, longCount: 30, check: everyNodeBack }
])
