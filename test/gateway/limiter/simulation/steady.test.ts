// Steady load exactly at the limit, spread over one to three processes, no faults: the Redis path
// admits what the in-process store's ring admits of the same requests, each at the instant it first
// reached Redis (so the network's delay counts for both) — grants, pools and reserves lose nothing to
// the distribution. (What the ring itself gives up against an exact per-request log
// at exactly the limit is the accuracy replay's to measure: docs/limiter-internals.md.)
import t from 'tap'
import { runFamilies } from '../../../helpers/sim/suite.js'

await runFamilies(t, 'test/gateway/limiter/simulation/steady.test.ts', [{
  family: 'steady',
  // 20 by default (60 before), 300 under TEST_LONG=1: under-admission at steady load, not a mutant's catch.
  count: 20,
  longCount: 300,
  check (t, r) {
    const ring = r.reference ?? 0
    t.ok(r.admitted >= ring - 1, `admitted ${r.admitted}, the in-process ring ${ring} (${r.underPct?.toFixed(2)} % under an exact log)`)
  }
}])
