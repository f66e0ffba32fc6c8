// Schedules aimed at the faults that broke the Redis path before (docs/limiter-internals.md): a
// process whose count is seconds old when Redis freezes (idle-process), a flood into a ban across a
// 3 s freeze (ban-recover: every round admits the whole limit, never more), Redis losing its data
// (data-loss: re-seeded before anyone grants again), a long tail of consumers under faults, and a
// burst over the limit across two processes (burst: the limit reached, nothing stranded).
import t from 'tap'
import { runFamilies } from '../../../helpers/sim/suite.js'

// 200 schedules each by default (300 before the timing families took a share of the budget: docs/simulator.md).
const count = 200
await runFamilies(t, 'test/gateway/limiter/simulation/targeted.test.ts', [
  { family: 'idle-process', count },
  {
    family: 'ban-recover',
    count,
    check: (t, r) => { t.ok(r.admitted >= 0.95 * r.schedule.consumers[0]!.perMinute, `admitted ${r.admitted} of ${r.schedule.consumers[0]!.perMinute} (≥ 95 %)`) }
  },
  {
    family: 'data-loss',
    count,
    check (t, r) {
      const after = r.freeAgainAt ?? Infinity
      for (const c of r.schedule.consumers) {
        const admitted = r.admissionsOf(c.id).filter((a) => a.t >= after).length
        t.ok(admitted > 0, `${c.id} admitted again once its window is empty by truth (${admitted} of 3 requests)`)
      }
    }
  },
  { family: 'long-tail', count },
  {
    family: 'burst',
    count,
    check: (t, r) => { t.ok(r.admitted >= 0.98 * r.schedule.consumers[0]!.perMinute, `a burst of ${r.requests} on ${r.schedule.consumers[0]!.perMinute}/min admitted ${r.admitted} (≥ 98 %)`) }
  }
])
