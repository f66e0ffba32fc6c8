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
import { longTailThrough } from '../../helpers/outage-long.js'

t.test('the long tail through a 5 min kill with an empty restart', { skip: TEST_LONG ? false : 'TEST_LONG=1 (npm run test:long): takes minutes' }, async (t) => {
  await longTailThrough(t, { kind: 'kill', name: 'killed 5 min', ms: 300_000 }, 0.5)
})
