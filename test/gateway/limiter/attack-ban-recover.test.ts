// Exact through faults, the case that went over before: the default ban policy, about 400
// admissions, then Redis frozen for 3 s while the flood goes on. Each process answers from units
// Redis already counted for it (its pool) and from the reserve Redis keeps back for it, the rest
// 503; when Redis is back, replies that arrived late were counted all the same, the flood fills the
// window in Redis and earns its ban there. The most admissions in any rolling minute is the limit,
// never more, and never much less (test/helpers/attack.ts).
import t from 'tap'
import { ATTACK_ID, ATTACK_LIMIT, assertWithinLimit, attack, suiteScenario } from '../../helpers/attack.js'
import { parseScrape, sampleValue } from '../../helpers/scrape.js'
import { FIELD } from '../../../src/gateway/limiter/redis/layout.js'

const BAN_SECONDS = 900

t.test('a flood across a 3 s freeze, then a ban: never more than the limit, and at least 95 % of it', async (t) => {
  const scenario = suiteScenario('ban then recover')
  const run = await attack(t, scenario)
  assertWithinLimit(t, run, scenario)
  t.ok(run.most >= 0.95 * ATTACK_LIMIT, `and the window used: ${run.most} of ${ATTACK_LIMIT} admitted (at least 570)`)
  const pause = run.faults[0]!
  const until = Number(await run.redis.cli('HGET', `rl:{${ATTACK_ID}}`, FIELD.banEnd))
  const bannedInRedisAt = until - BAN_SECONDS * 1000
  t.ok(bannedInRedisAt > pause.start + pause.ms, `the ban was decided in Redis once it was back, ${((bannedInRedisAt - pause.start - pause.ms) / 1000).toFixed(1)} s after the pause`)
  for (const adminUrl of run.adminUrls) {
    const active = sampleValue(parseScrape(await (await fetch(`${adminUrl}/metrics`)).text()), 'gateway_store_fallback_active')
    t.equal(active, 0, 'the shard came back up although the banned consumer sends nothing to Redis')
  }
})
