// Shadow limits: the exact definition at its edge (shadow 30: the 31st request of a window is the
// first shadow rejection, whether the enforced limit admitted it or not), the config rules with
// their messages, `announce` in RateLimit-Policy (and nothing of an unannounced shadow), and a real
// gateway that admits every request while gateway_shadow_rejections_total counts what the shadow
// would have refused.
import t from 'tap'
import { decide } from '../../../src/gateway/limiter/decide.js'
import { announcedPolicies, shadowRejection } from '../../../src/gateway/limiter/shadow.js'
import type { ConsumeResult } from '../../../src/gateway/limiter/store.js'
import type { ShadowLimits } from '../../../src/gateway/config/types.js'
import { startGateway } from '../../helpers/gateway.js'
import { bearer, configProblems, DEMO_KEYS, testConfig } from '../../helpers/config-fixture.js'
import { sampleValue, scrape } from '../../helpers/scrape.js'

const NOW = Date.UTC(2030, 0, 1, 12)
const SHADOW_30: ShadowLimits = { perMinute: 30, perDay: undefined, announce: false }

function counted (outcome: 'ok' | 'rate_limited', minute: number, day = minute): ConsumeResult {
  return {
    outcome,
    now: NOW,
    minute: { count: minute, resetAt: NOW + 60_000, retryAt: 0 },
    day: { count: day, resetAt: NOW + 86_400_000, retryAt: 0 },
    bannedUntil: 0
  }
}

t.test('shadow 30: requests 1–30 pass the shadow, the 31st admitted one is its first rejection', async (t) => {
  // An admitted request's count includes itself: the 30th request sees 30, the 31st sees 31.
  for (let n = 1; n <= 30; n++) t.equal(shadowRejection(counted('ok', n), SHADOW_30), undefined, `request ${n}`)
  t.equal(shadowRejection(counted('ok', 31), SHADOW_30), 'minute', 'request 31')
  t.equal(shadowRejection(counted('ok', 45), SHADOW_30), 'minute', 'and every one after it')
})

t.test('a rejected request\'s count excludes it: 30 counted before it is a shadow rejection, 29 is not', async (t) => {
  t.equal(shadowRejection(counted('rate_limited', 29), SHADOW_30), undefined)
  t.equal(shadowRejection(counted('rate_limited', 30), SHADOW_30), 'minute')
})

t.test('both windows over their shadow: counted once, in the day (the window that refuses longer)', async (t) => {
  const both: ShadowLimits = { perMinute: 30, perDay: 100, announce: false }
  t.equal(shadowRejection(counted('ok', 31, 101), both), 'day')
  t.equal(shadowRejection(counted('ok', 31, 100), both), 'minute', 'the day at exactly its shadow still admits')
  t.equal(shadowRejection(counted('ok', 5, 101), both), 'day')
  t.equal(shadowRejection(counted('ok', 31, 101), { perMinute: undefined, perDay: 100, announce: false }), 'day', 'a day-only shadow')
})

t.test('decide(): enforcement is unchanged by a shadow; the shadow verdict rides beside it', async (t) => {
  const limits = { perMinute: 60, perDay: 1000, shadow: SHADOW_30 }
  const decision = decide(counted('ok', 31), limits, 'free')
  t.match(decision, { allowed: true, outcome: 'ok', limit: 60, remaining: 29, shadowRejectedBy: 'minute', now: NOW })
  t.equal(decision.policyField, '"minute";q=60;w=60, "day";q=1000;w=86400', 'an unannounced shadow is not in the policy')
  t.equal(decide(counted('ok', 31), { perMinute: 60, perDay: 1000 }, 'free').shadowRejectedBy, undefined, 'no shadow, no verdict')
})

t.test('announce: the shadow is added to RateLimit-Policy as the next policies', async (t) => {
  t.equal(announcedPolicies({ perMinute: 30, perDay: 500, announce: true }), ', "next-minute";q=30;w=60, "next-day";q=500;w=86400')
  t.equal(announcedPolicies({ perMinute: undefined, perDay: 500, announce: true }), ', "next-day";q=500;w=86400')
  t.equal(announcedPolicies({ perMinute: 30, perDay: 500, announce: false }), '')
  const limits = { perMinute: 60, perDay: 1000, shadow: { perMinute: 30, perDay: undefined, announce: true } }
  t.equal(decide(counted('ok', 1), limits, 'free').policyField, '"minute";q=60;w=60, "day";q=1000;w=86400, "next-minute";q=30;w=60')
})

const PLANS = (freeShadow: string): string => [
  'plans:',
  `  free: { perMinute: 60, perDay: 1000${freeShadow} }`,
  '  pro: { perMinute: 300, perDay: 10000 }',
  '  business: { perMinute: 1000, perDay: 100000 }',
  '  enterprise: { custom: true }',
  'anonymous: { perMinute: 30, perDay: 300 }',
  'ban: { threshold: 30, windowSeconds: 60, durationSeconds: 900, maxDurationSeconds: 86400 }',
  ''
].join('\n')

t.test('config: a valid shadow is loaded (announce defaults to false); bad ones are problems with clear messages', async (t) => {
  const snapshot = testConfig({ 'plans.yaml': PLANS(', shadow: { perMinute: 30 }') })
  t.same(snapshot.plans.get('free')?.shadow, { perMinute: 30, perDay: undefined, announce: false })
  t.same(snapshot.keysById.get('demo-free')?.limits.shadow, { perMinute: 30, perDay: undefined, announce: false }, 'the plan\'s keys carry it')
  t.ok(Object.isFrozen(snapshot.plans.get('free')?.shadow), 'frozen like the rest of the snapshot')

  t.match(configProblems({ 'plans.yaml': PLANS(', shadow: { perMinute: 60 }') }), [/plans\.free\.shadow\.perMinute: 60 equals the enforced perMinute/])
  t.match(configProblems({ 'plans.yaml': PLANS(', shadow: { perDay: 2000 }') }), [/plans\.free\.shadow\.perDay: 2000 is above the enforced perDay \(1000\)/])
  t.match(configProblems({ 'plans.yaml': PLANS(', shadow: { announce: true }') }), [/plans\.free\.shadow: needs perMinute, perDay or perMonth/])
  t.match(configProblems({ 'plans.yaml': PLANS(', shadow: { perDay: 50 }') }), [/plans\.free\.shadow: perDay \(50\) must be at least perMinute \(60\) once the shadow applies/])
  t.match(configProblems({ 'plans.yaml': PLANS(', shadow: { perMinute: 0 }') }), [/plans\.free/], 'bounds like the enforced limits')
  t.match(configProblems({ 'plans.yaml': PLANS(', shadow: { perMinute: 30, burst: 2 }') }), [/plans\.free/], 'unknown fields refused')
  const custom = PLANS('').replace('enterprise: { custom: true }', 'enterprise: { custom: true, shadow: { perMinute: 10 } }')
  t.match(configProblems({ 'plans.yaml': custom }), [/plans\.enterprise\.shadow: a custom plan has no limits of its own/])
})

t.test('config: an Enterprise key\'s own limits may carry a shadow, checked the same way', async (t) => {
  const keys = (shadow: string): string => [
    'keys:',
    '  - id: demo-enterprise',
    '    sha256: 33f639c49918e5eeecf11fa176c37b1c383de37712dc82106a4aacc88fc0e890',
    '    plan: enterprise',
    `    limits: { perMinute: 5000, perDay: 2000000${shadow} }`,
    ''
  ].join('\n')
  const snapshot = testConfig({ 'keys.yaml': keys(', shadow: { perMinute: 4000, announce: true }') })
  t.same(snapshot.keysById.get('demo-enterprise')?.limits, { perMinute: 5000, perDay: 2000000, shadow: { perMinute: 4000, perDay: undefined, announce: true } })
  t.match(configProblems({ 'keys.yaml': keys(', shadow: { perMinute: 5000 }') }), [/keys\[0\]\.limits\.shadow\.perMinute: 5000 equals the enforced perMinute/])
  t.match(configProblems({ 'keys.yaml': keys(', shadow: { perDay: 3000000 }') }), [/keys\[0\]\.limits\.shadow\.perDay: 3000000 is above the enforced perDay/])
})

t.test('a gateway admits every request under the enforced limit and counts the shadow rejections by plan and window', async (t) => {
  let clock = NOW
  const config = testConfig({ 'plans.yaml': PLANS(', shadow: { perMinute: 3, announce: true }') })
  const gw = await startGateway(t, { config, now: () => clock })
  const before = await scrape(gw.adminUrl)
  t.equal(sampleValue(before.samples, 'gateway_shadow_rejections_total', { plan: 'free', window: 'minute' }), 0, 'at 0 from the first scrape')
  t.equal(sampleValue(before.samples, 'gateway_shadow_rejections_total', { plan: 'pro', window: 'day' }), 0)
  t.equal(sampleValue(before.samples, 'gateway_shadow_rejections_total', { plan: 'anonymous', window: 'minute' }), undefined, 'the anonymous policy has no shadow')

  const policies: string[] = []
  for (let i = 0; i < 5; i++) {
    const res = await fetch(`${gw.url}/v1/pets?limit=1`, { headers: bearer(DEMO_KEYS.free) })
    await res.arrayBuffer()
    t.equal(res.status, 200, `request ${i + 1} admitted`)
    policies.push(res.headers.get('ratelimit-policy') ?? '')
    clock += 10
  }
  t.equal(policies[0], '"minute";q=60;w=60, "day";q=1000;w=86400, "next-minute";q=3;w=60', 'announced: the next policy is in the header')
  const pro = await fetch(`${gw.url}/v1/pets?limit=1`, { headers: bearer(DEMO_KEYS.pro) })
  await pro.arrayBuffer()
  t.equal(pro.headers.get('ratelimit-policy'), '"minute";q=300;w=60, "day";q=10000;w=86400', 'a plan without a shadow shows only its policy')

  const after = await scrape(gw.adminUrl)
  t.equal(sampleValue(after.samples, 'gateway_shadow_rejections_total', { plan: 'free', window: 'minute' }), 2, 'requests 4 and 5 of shadow 3')
  t.equal(sampleValue(after.samples, 'gateway_ratelimit_rejections_total', { plan: 'free', window: 'minute' }), 0, 'none was enforced')
})

t.test('an unannounced shadow leaves the client\'s headers exactly as without it', async (t) => {
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': PLANS(', shadow: { perMinute: 1 }') }) })
  const plain = await startGateway(t, { config: testConfig({ 'plans.yaml': PLANS('') }), backendUrl: gw.backend?.url })
  for (const target of [gw, plain]) {
    const res = await fetch(`${target.url}/v1/pets?limit=1`, { headers: bearer(DEMO_KEYS.free) })
    await res.arrayBuffer()
    t.equal(res.headers.get('ratelimit-policy'), '"minute";q=60;w=60, "day";q=1000;w=86400')
    t.match(res.headers.get('ratelimit') ?? '', /^"minute";r=59;t=\d+$/)
  }
})

t.test('an Enterprise key\'s own shadow: counted under its plan, listed by GET /admin/plans/enterprise/shadow', async (t) => {
  const keys = [
    'keys:',
    '  - id: demo-enterprise',
    '    sha256: 33f639c49918e5eeecf11fa176c37b1c383de37712dc82106a4aacc88fc0e890',
    '    plan: enterprise',
    '    limits: { perMinute: 5000, perDay: 2000000, shadow: { perMinute: 2 } }',
    ''
  ].join('\n')
  const gw = await startGateway(t, { config: testConfig({ 'keys.yaml': keys }) })
  for (let i = 0; i < 5; i++) {
    const res = await fetch(`${gw.url}/v1/pets?limit=1`, { headers: bearer(DEMO_KEYS.enterprise) })
    await res.arrayBuffer()
    t.equal(res.status, 200)
  }
  const { samples } = await scrape(gw.adminUrl)
  t.equal(sampleValue(samples, 'gateway_shadow_rejections_total', { plan: 'enterprise', window: 'minute' }), 3)
  const shadow = await (await fetch(`${gw.adminUrl}/admin/plans/enterprise/shadow`)).json() as Record<string, unknown>
  t.match(shadow, { plan: 'enterprise', limits: 'custom', shadow: null, consumers: 1, rejections: 3, top: [{ consumerId: 'demo-enterprise', rejections: 3, admitted: 3 }] })
})
