// Exact through faults, the control: two gateway processes on one Redis, a 600/min consumer at
// ~300 requests/s with a burst on every second boundary and no fault at all. The most admissions
// in any rolling minute is the limit, never more (test/helpers/attack.ts).
import t from 'tap'
import { ATTACK_LIMIT, assertWithinLimit, attack, suiteScenario } from '../../helpers/attack.js'

t.test('no fault: never more than the limit in a rolling minute', async (t) => {
  const scenario = suiteScenario('no fault')
  const run = await attack(t, scenario)
  assertWithinLimit(t, run, scenario)
  t.ok(run.most >= ATTACK_LIMIT - 6, `and the limit is reached: ${run.most} (at least ${ATTACK_LIMIT - 6})`)
  t.ok((run.statuses[429] ?? 0) > 1_000, 'the rest answered 429')
})
