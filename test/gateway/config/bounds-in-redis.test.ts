// Property: any plans.yaml that passes validation runs through the real Redis store without an error
// (the store production builds, over a real redis-server and the script the gateway runs) — admitted up to its limit,
// then 429s, then a ban of exactly the configured duration — whatever numbers it was written with.
// The generated numbers are biased to where arithmetic breaks: the bounds and one past them, values
// JavaScript prints in exponent form, floats, zero and below. Before the bounds, `windowSeconds:
// 1e300` passed validation and every 429 then failed in the script (issue 26, finding 4).
import fc from 'fast-check'
import t from 'tap'
import { ConfigError, parseConfig } from '../../../src/gateway/config/loader.js'
import { MAX_BAN_SECONDS, MAX_BAN_THRESHOLD, MAX_PER_DAY, MAX_PER_MINUTE } from '../../../src/gateway/config/schema.js'
import type { ConfigSnapshot } from '../../../src/gateway/config/types.js'
import { createStore } from '../../../src/gateway/limiter/create-store.js'
import { askOf } from '../../../src/gateway/limiter/store.js'
import { configTexts } from '../../helpers/config-fixture.js'
import { longOr } from '../../helpers/long.js'
import { startRedis } from '../../helpers/redis.js'

const SEED = 20_261_126
/** Generated configs: 120 in npm test (each one ~25 Redis round trips in turn), 300 under TEST_LONG=1. */
const RUNS = longOr(120, 300)
/** Calls per generated config: enough to reach the limit, the 429s and the ban when the numbers are small. */
const MAX_CALLS = 12

/** A number as YAML would carry it: small ones (which reach 429s and bans), the bound and around it, and what breaks arithmetic. */
function field (max: number): fc.Arbitrary<number> {
  return fc.oneof(
    { weight: 12, arbitrary: fc.integer({ min: 1, max: 3 }) },
    { weight: 4, arbitrary: fc.integer({ min: 1, max }) },
    { weight: 2, arbitrary: fc.constantFrom(max, max - 1, max + 1, 0, -1) },
    { weight: 1, arbitrary: fc.constantFrom(1e15, 2 ** 53 + 1, 1e21, 1e300, 1.5, Number.MAX_SAFE_INTEGER) }
  )
}

const plans = fc.record({
  perMinute: field(MAX_PER_MINUTE),
  perDay: fc.oneof(field(MAX_PER_DAY), fc.constant(3)),
  threshold: field(MAX_BAN_THRESHOLD),
  windowSeconds: field(MAX_BAN_SECONDS),
  durationSeconds: field(MAX_BAN_SECONDS),
  maxDurationSeconds: fc.oneof(field(MAX_BAN_SECONDS), fc.constant(MAX_BAN_SECONDS))
})

function plansYaml (p: typeof plans extends fc.Arbitrary<infer T> ? T : never): string {
  return [
    'plans:',
    `  p: { perMinute: ${p.perMinute}, perDay: ${p.perDay} }`,
    `anonymous: { perMinute: ${p.perMinute}, perDay: ${p.perDay} }`,
    `ban: { threshold: ${p.threshold}, windowSeconds: ${p.windowSeconds}, durationSeconds: ${p.durationSeconds}, maxDurationSeconds: ${p.maxDurationSeconds} }`,
    ''
  ].join('\n')
}

function validated (text: string): ConfigSnapshot | undefined {
  try {
    return parseConfig(configTexts({ 'plans.yaml': text, 'keys.yaml': 'keys: []\n' }))
  } catch (err) {
    if (err instanceof ConfigError) return undefined
    throw err
  }
}

t.test('every config that passes validation runs through the real Redis script: limit, 429s, then a ban of the configured length', async (t) => {
  const redis = await startRedis(t)
  const store = await createStore({ redisUrl: redis.url })
  t.teardown(async () => { await store.close() })
  let accepted = 0
  let rejected = 0
  let banned = 0
  let atBound = 0
  let run = 0
  await fc.assert(fc.asyncProperty(plans, async (p) => {
    const snapshot = validated(plansYaml(p))
    if (snapshot === undefined) {
      rejected++
      return
    }
    accepted++
    if (p.perMinute === MAX_PER_MINUTE || p.perDay === MAX_PER_DAY || p.threshold === MAX_BAN_THRESHOLD ||
      [p.windowSeconds, p.durationSeconds, p.maxDurationSeconds].includes(MAX_BAN_SECONDS)) atBound++
    const limits = snapshot.plans.get('p')
    if (limits === undefined) throw new Error('plan p has no limits')
    const { ban } = snapshot
    const id = `bounds-${run++}`
    let admitted = 0
    let limited = 0
    for (let i = 0; i < MAX_CALLS; i++) {
      const before = await store.peek(id, askOf(limits))
      const result = await store.consume(id, askOf(limits, ban))
      if (before.outcome === 'key_banned' || result.outcome === 'key_banned') {
        if (result.outcome !== 'key_banned') throw new Error(`peek said banned, consume said ${result.outcome}`)
        continue
      }
      if (result.outcome === 'ok') {
        admitted++
        if (result.minute.count !== admitted || result.day.count !== admitted) throw new Error(`counts ${result.minute.count}/${result.day.count} after ${admitted} admissions`)
      } else if (result.outcome === 'rate_limited') {
        limited++
        if (result.minute.retryAt <= result.now && result.day.retryAt <= result.now) throw new Error('a 429 without a future retry time')
      } else {
        banned++
        const expectedMs = Math.min(ban.durationSeconds, ban.maxDurationSeconds) * 1000
        if (result.bannedUntil - result.now !== expectedMs) throw new Error(`ban of ${result.bannedUntil - result.now} ms, configured ${expectedMs} ms`)
        if (limited !== ban.threshold) throw new Error(`banned after ${limited} 429s, threshold ${ban.threshold}`)
      }
    }
    if (admitted !== Math.min(limits.perMinute, limits.perDay, MAX_CALLS)) throw new Error(`admitted ${admitted} of limits ${limits.perMinute}/${limits.perDay}`)
    // The anonymous policy's limits go through the same script, never banned.
    const anonymous = await store.consume(`ip:${id}`, askOf(snapshot.anonymous))
    if (anonymous.outcome !== 'ok') throw new Error(`anonymous first request: ${anonymous.outcome}`)
  }), { seed: SEED, numRuns: RUNS })
  t.ok(accepted >= RUNS / 4, `${accepted} configs accepted and run through Redis`)
  t.ok(rejected >= RUNS / 10, `${rejected} configs refused by validation`)
  // One in 30 configs at least (10 of 300), so the check holds at either count.
  t.ok(banned >= RUNS / 30, `${banned} bans started, each exactly as long as configured`)
  t.ok(atBound >= RUNS / 30, `${atBound} accepted configs had a field at its bound`)
})
