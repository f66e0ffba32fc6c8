// Exact through faults: Redis frozen (SIGSTOP) for 300 ms every 3-4 s under the attack load, some
// pauses starting just before a second boundary so that the boundary's burst meets a frozen Redis.
// A pause longer than STORE_TIMEOUT_MS (250 ms): the shard goes down, each process answers from its pool and its reserve, the rest 503; the late replies still count.
// The most admissions in any rolling minute stays the limit (test/helpers/attack.ts).
import t from 'tap'
import { ATTACK_LIMIT, assertWithinLimit, attack, suiteScenario } from '../../helpers/attack.js'

t.test('300 ms pauses: never more than the limit in a rolling minute', async (t) => {
  const scenario = suiteScenario('300 ms pauses')
  const run = await attack(t, scenario)
  assertWithinLimit(t, run, scenario)
  t.ok(run.most >= ATTACK_LIMIT - 6, `and the limit is reached: ${run.most} (at least ${ATTACK_LIMIT - 6})`)
})
