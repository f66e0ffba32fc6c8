// Exact through faults: redis-server killed under the attack load and restarted empty (no
// persistence), twice. The processes see their connections drop, answer from what they knew
// meanwhile, find the epoch marker gone when Redis is back and re-seed it from their knowledge
// before deciding there again (test/helpers/attack.ts).
import t from 'tap'
import { ATTACK_ID, ATTACK_LIMIT, assertWithinLimit, attack, SCENARIOS } from '../../helpers/attack.js'

t.test('kill and restart without persistence: never more than the limit in a rolling minute', async (t) => {
  const scenario = SCENARIOS['kill and restart']
  const run = await attack(t, scenario)
  assertWithinLimit(t, run, scenario)
  t.ok(run.most >= ATTACK_LIMIT - 6, 'and the limit is reached')
  const counted = Number(await run.redis.cli('HGET', `rl:{${ATTACK_ID}}:m`, 'n'))
  t.ok(counted >= run.most, `the restarted Redis was re-seeded: it counts ${counted} in the consumer's window`)
})
