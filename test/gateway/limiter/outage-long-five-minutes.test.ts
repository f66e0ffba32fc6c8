// Five minutes without Redis with real processes and the shipped defaults (STORE_ON_ERROR=local): two
// gateway processes on one redis-server, 2,000 consumers by Zipf (s = 1.1) at about 150 requests/s far
// below their limits (3,000/min) and four consumers racing a 60/min limit at 3/s each; Redis killed
// and restarted empty after 300 s (a dead Redis is the long outage an operator meets; the restart
// re-seeds what the processes admitted). The reserves cover about the first minute, then each consumer
// has its allowance per rolling 62 s per process: the tail keeps a floor of its traffic (the share is
// printed, docs/limiter-internals.md states it), is answered in full once Redis is back, and no consumer
// goes over the stated bound. Takes about six minutes: TEST_LONG=1 (npm run test:long) runs it.
// OUTAGE_LONG_POLICY=strict measures the strict policy the same way.
import t from 'tap'
import { TEST_LONG } from '../../helpers/long.js'
import { assertLongOutage, longOutage, policyUnderTest } from '../../helpers/outage-long.js'

t.test('the long tail through a 5 min kill with an empty restart', { skip: TEST_LONG ? false : 'TEST_LONG=1 (npm run test:long): takes minutes' }, async (t) => {
  const policy = policyUnderTest()
  const run = await longOutage(t, {
    tail: { consumers: 2_000, rate: 150, perMinute: 3_000 },
    racers: { consumers: 4, rate: 3, perMinute: 60 },
    phases: [
      { kind: 'traffic', name: 'before', ms: 25_000 },
      { kind: 'kill', name: 'killed 5 min', ms: 300_000 },
      { kind: 'traffic', name: 'recovering', ms: 5_000 },
      { kind: 'traffic', name: 'after recovery', ms: 10_000 }
    ],
    env: { STORE_ON_ERROR: policy }
  })
  assertLongOutage(t, run, { outage: 'killed 5 min', minShare: 0.5, policy })
})
