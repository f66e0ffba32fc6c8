// Schedules aimed at the faults that broke the Redis path before (docs/limiter-internals.md): a
// process whose count is seconds old when Redis freezes (idle-process), a flood into a ban across a
// 3 s freeze (ban-recover: every round admits the whole limit, never more), Redis losing its data
// (data-loss: re-seeded before anyone grants again), a long tail of consumers under faults, and a
// burst over the limit across two processes (burst: the limit reached, nothing stranded).
import t from 'tap'
import { runFamilies } from '../../../helpers/sim/suite.js'

// 20 schedules each by default, 1,000 under TEST_LONG=1: these families are the regression suite of the faults
// that broke the Redis path before, and no mutant of the gate is caught first here (docs/simulator.md). (300,
// then 200, before the timing families took the budget.)
const count = 20
const longCount = 1_000
await runFamilies(t, 'test/gateway/limiter/simulation/targeted.test.ts', [
  { family: 'idle-process', count, longCount },
  {
    family: 'ban-recover',
    count,
    longCount,
    check: (t, r) => { t.ok(r.admitted >= 0.95 * r.schedule.consumers[0]!.perMinute, `admitted ${r.admitted} of ${r.schedule.consumers[0]!.perMinute} (≥ 95 %)`) }
  },
  {
    // ban-recover's flood with one process's link slower than the call budget as Redis runs its parked backlog after
    // the thaw: what Redis admitted of it, answered late, must still be admitted while the other's refusals start the ban.
    family: 'ban-slow-thaw',
    count,
    longCount,
    check: (t, r) => { t.ok(r.admitted >= 0.95 * r.schedule.consumers[0]!.perMinute, `admitted ${r.admitted} of ${r.schedule.consumers[0]!.perMinute} (≥ 95 %)`) }
  },
  {
    family: 'data-loss',
    count,
    longCount,
    check (t, r) {
      const after = r.freeAgainAt ?? Infinity
      for (const c of r.schedule.consumers) {
        const admitted = r.admissionsOf(c.id).filter((a) => a.t >= after).length
        t.ok(admitted > 0, `${c.id} admitted again once its window is empty by truth (${admitted} of 3 requests)`)
      }
    }
  },
  { family: 'long-tail', count, longCount },
  {
    family: 'burst',
    count,
    longCount,
    check: (t, r) => { t.ok(r.admitted >= 0.98 * r.schedule.consumers[0]!.perMinute, `a burst of ${r.requests} on ${r.schedule.consumers[0]!.perMinute}/min admitted ${r.admitted} (≥ 98 %)`) }
  }
])
