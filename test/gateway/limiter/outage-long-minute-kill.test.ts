// A minute with Redis dead, real processes and the shipped defaults (STORE_ON_ERROR=local): the run of
// outage-long-minute.test.ts with Redis killed (SIGKILL) and restarted empty after 60 s instead of frozen.
// The target is the same — ≥ 95 % of the tail answered 2xx through it, in full once Redis is back, no
// consumer over the stated bound — and the reserves are what carries the busy consumers through it, as
// they do through the freeze. Takes about four minutes: TEST_LONG=1 (npm run test:long) runs it.
import t from 'tap'
import { TEST_LONG } from '../../helpers/long.js'
import { longTailThrough } from '../../helpers/outage-long.js'

t.test('the long tail through a 60 s kill with an empty restart', { skip: TEST_LONG ? false : 'TEST_LONG=1 (npm run test:long): takes minutes' }, async (t) => {
  await longTailThrough(t, { kind: 'kill', name: 'killed 60 s', ms: 60_000 }, 0.95)
})
