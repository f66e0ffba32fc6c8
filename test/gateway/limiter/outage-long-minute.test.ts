// A minute's Redis outage with real processes and the shipped defaults (STORE_ON_ERROR=local): two
// gateway processes on one redis-server, 2,000 consumers by Zipf (s = 1.1) at about 150 requests/s far
// below their limits (3,000/min) and four consumers racing a 60/min limit at 3/s each, Redis frozen
// (SIGSTOP) for 60 s. The tail is answered ≥ 95 % through it — the busy consumers from their reserves
// (a minute of their traffic), the rest from the outage allowance — and in full once Redis is back;
// no tail consumer goes over its limit in any rolling minute, no racer by more than the allowance of
// both processes (6). Takes about two minutes: TEST_LONG=1 (npm run test:long) runs it.
// OUTAGE_LONG_POLICY=strict measures the strict policy the same way (docs/limiter-internals.md's table).
import t from 'tap'
import { TEST_LONG } from '../../helpers/long.js'
import { longTailThrough } from '../../helpers/outage-long.js'

t.test('the long tail through a 60 s freeze', { skip: TEST_LONG ? false : 'TEST_LONG=1 (npm run test:long): takes minutes' }, async (t) => {
  await longTailThrough(t, { kind: 'freeze', name: 'frozen 60 s', ms: 60_000 }, 0.95)
})
