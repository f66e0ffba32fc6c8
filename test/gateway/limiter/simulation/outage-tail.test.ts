// The long tail through a Redis outage under the shipped STORE_ON_ERROR=local, in the deterministic
// simulator (test/helpers/sim/outage-schedules.ts): hundreds of consumers by Zipf on two or three
// processes, one pause or kill (with or without its data) of 1 s to 90 s, traffic through recovery.
// Every rolling minute, day and month is within the limit plus the outage allowance of the processes
// that ran (the suite's checker, told the bound per consumer); the tail — consumers far below their
// limits — is answered through the outage (≥ 99 % up to 10 s, ≥ 95 % up to 60 s, most past the
// reserve's cover) and wholly once it is over. docs/limiter-internals.md states the bound.
import t from 'tap'
import { fullest } from '../../../helpers/sim/check.js'
import type { Report } from '../../../helpers/sim/run.js'
import { runFamilies } from '../../../helpers/sim/suite.js'

/** After the outage ends, its recovery (probes, the barrier after a loss) is over within this. */
const RECOVERY_MS = 4_000

/** The share of the tail answered through the outage and its recovery; its refusals after that. */
function tailShares (r: Report): { during: number, outageMs: number, refusedAfter: number } {
  const { from, to } = r.schedule.outage!
  const isTail = (id: string): boolean => id.startsWith('tail')
  const inOutage = r.schedule.arrivals.filter((a) => isTail(r.schedule.consumers[a.consumer]!.id) && a.t >= from && a.t < to + RECOVERY_MS).length
  const refused = r.refusals.filter((x) => isTail(x.consumer))
  const refusedAfter = refused.filter((x) => x.t >= to + RECOVERY_MS).length
  return { during: inOutage === 0 ? 1 : 1 - (refused.length - refusedAfter) / inOutage, outageMs: to - from, refusedAfter }
}

const worst = { over: 0, overSurge: 0, share: [1, 1, 1] }
// 12 schedules by default (30 before: hundreds of consumers each, ~0.7 s of CPU a schedule), 150 under TEST_LONG=1.
await runFamilies(t, 'test/gateway/limiter/simulation/outage-tail.test.ts', [{
  family: 'outage-tail',
  count: 12,
  longCount: 150,
  check (t, r) {
    const s = tailShares(r)
    const target = s.outageMs <= 10_000 ? 0.99 : s.outageMs <= 60_000 ? 0.95 : 0.8
    const band = s.outageMs <= 10_000 ? 0 : s.outageMs <= 60_000 ? 1 : 2
    worst.share[band] = Math.min(worst.share[band]!, s.during)
    t.ok(s.during >= target, `the tail answered through a ${(s.outageMs / 1000).toFixed(1)} s outage: ${(100 * s.during).toFixed(2)} % (≥ ${100 * target} %)`)
    t.ok(s.refusedAfter === 0, `the tail answered after recovery (${s.refusedAfter} refused)`)
    for (const c of r.schedule.consumers) {
      const over = fullest(r.admissionsOf(c.id), 60_000).units - c.perMinute
      if (c.id === 'surge') worst.overSurge = Math.max(worst.overSurge, over)
      else worst.over = Math.max(worst.over, over)
      // A tail consumer stays far below its limit: 0 over, whatever the allowance would allow.
      if (c.id.startsWith('tail')) t.ok(over <= 0, `${c.id} never over its minute limit (${over})`)
    }
  }
}])
t.comment(`worst over a minute limit: ${worst.over} units (tail and racing consumers), ${worst.overSurge} (the surging one, allowed the allowance); the tail's least answered share: ${worst.share.map((s) => (100 * s).toFixed(2) + ' %').join(' , ')} (≤ 10 s, ≤ 60 s, longer)`)
