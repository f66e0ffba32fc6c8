// Exact through faults: redis-server killed under the attack load and restarted empty (no
// persistence), twice. The processes see their connections drop, answer from their pools and
// reserves meanwhile, find the epoch mark gone when Redis is back, re-seed what they admitted
// (each bucket where it was counted) and wait out the recovery barrier before granting there
// again (test/helpers/attack.ts).
import t from 'tap'
import { ATTACK_ID, ATTACK_LIMIT, assertWithinLimit, attack, suiteScenario } from '../../helpers/attack.js'
import { FIELD } from '../../../src/gateway/limiter/redis/layout.js'

t.test('kill and restart without persistence: never more than the limit in a rolling minute', async (t) => {
  const scenario = suiteScenario('kill and restart')
  const run = await attack(t, scenario)
  assertWithinLimit(t, run, scenario)
  t.ok(run.most >= ATTACK_LIMIT - 6, `and the limit is reached: ${run.most} (at least ${ATTACK_LIMIT - 6})`)
  const counted = Number(await run.redis.cli('HGET', `rl:{${ATTACK_ID}}`, FIELD.minuteUnits))
  t.ok(counted >= run.most, `the restarted Redis was re-seeded: it counts ${counted} in the consumer's window`)
})
