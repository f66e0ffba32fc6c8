// Exact through faults, the ban that outlived its fault (it used to): the default ban policy, 460
// admissions, then Redis frozen for 3 s while the load goes on. Each process's fallback admits its
// share of the room it knew and then bans the consumer locally (30 429s); when Redis is back, that
// local ban is no longer what answers: the breakers close by their own probes although the banned
// consumer sends nothing to Redis, and the consumer is decided in Redis again, which bans it in its
// turn. The most admissions in any rolling minute stays the limit (test/helpers/attack.ts).
import t from 'tap'
import { ATTACK_ID, assertWithinLimit, attack, SCENARIOS } from '../../helpers/attack.js'
import { parseScrape, sampleValue } from '../../helpers/scrape.js'

const BAN_SECONDS = 900
/**
 * Open (docs/limiter-internals.md, "Through faults"): when Redis wakes, one process can decide there
 * before another's fallback admissions are written back, and admit room they already used — 618 and
 * 621 of 600 in about one run in six. The bound is still checked and shown on every run.
 */
const KNOWN_RECOVERY_RACE = 'recovery race: a process decides in Redis before another\'s fallback admissions are written back'

t.test('a local ban then Redis back: never more than the limit, and Redis decides again', async (t) => {
  const scenario = SCENARIOS['ban then recover']
  const run = await attack(t, scenario)
  assertWithinLimit(t, run, scenario, KNOWN_RECOVERY_RACE)
  const pause = run.faults[0]!
  const banned = (a: { retryAfter: number }): boolean => a.retryAfter > 61
  const during = run.answers.filter((a) => a.send > pause.start + 500 && a.recv < pause.start + pause.ms)
  t.ok(during.some(banned), `the fallback banned the consumer while Redis was frozen (${during.filter(banned).length} of ${during.length} answers key_banned)`)
  const until = Number(await run.redis.cli('HGET', `rl:{${ATTACK_ID}}:b`, 'u'))
  const bannedInRedisAt = until - BAN_SECONDS * 1000
  t.ok(bannedInRedisAt > pause.start + pause.ms, `after Redis was back the consumer was decided there: Redis banned it ${((bannedInRedisAt - pause.start - pause.ms) / 1000).toFixed(1)} s after the pause`)
  for (const adminUrl of run.adminUrls) {
    const active = sampleValue(parseScrape(await (await fetch(`${adminUrl}/metrics`)).text()), 'gateway_store_fallback_active')
    t.equal(active, 0, 'the breaker closed although the banned consumer sends nothing to Redis')
  }
})
