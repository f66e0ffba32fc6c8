// Every numeric field of the config has bounds the limiter's arithmetic carries exactly, and the rules
// that span fields (perDay ≥ perMinute, a ban's cap ≥ its duration) are config problems with messages
// that say what to change. The real Redis script runs every config that passes: see
// test/gateway/limiter-config/redis-arithmetic.test.ts.
import t from 'tap'
import { MAX_BAN_SECONDS, MAX_BAN_THRESHOLD, MAX_PER_DAY, MAX_PER_MINUTE } from '../../../src/gateway/config/schema.js'
import { configProblems, plansYaml } from '../../helpers/config-fixture.js'

const D1 = 'a'.repeat(64)

const problemsOf = configProblems

t.test('regression (attack: ban windowSeconds 1e300 broke every 429 in Redis): each ban field is bounded', async (t) => {
  t.same(problemsOf({ 'plans.yaml': plansYaml({ ban: { windowSeconds: 1e300 } }) }), ['plans.yaml: ban.windowSeconds: must be <= 86400'])
  t.same(problemsOf({ 'plans.yaml': plansYaml({ ban: { durationSeconds: 86_401 } }) }), ['plans.yaml: ban.durationSeconds: must be <= 86400'])
  t.same(problemsOf({ 'plans.yaml': plansYaml({ ban: { maxDurationSeconds: 1e21 } }) }), ['plans.yaml: ban.maxDurationSeconds: must be <= 86400'])
  t.same(problemsOf({ 'plans.yaml': plansYaml({ ban: { threshold: 1e7 } }) }), ['plans.yaml: ban.threshold: must be <= 1000000'])
  t.same(problemsOf({ 'plans.yaml': plansYaml({ ban: { threshold: MAX_BAN_THRESHOLD, windowSeconds: MAX_BAN_SECONDS, durationSeconds: MAX_BAN_SECONDS, maxDurationSeconds: MAX_BAN_SECONDS } }) }), [], 'every bound itself is accepted')
})

t.test('limits are bounded wherever they appear: plans, anonymous, a key\'s own limits', async (t) => {
  t.same(problemsOf({ 'plans.yaml': plansYaml({ free: { perMinute: MAX_PER_MINUTE + 1, perDay: MAX_PER_DAY } }) }), ['plans.yaml: plans.free.perMinute: must be <= 1000000000'])
  t.same(problemsOf({ 'plans.yaml': plansYaml({ anonymous: { perMinute: 1, perDay: 1e300 } }) }), ['plans.yaml: anonymous.perDay: must be <= 1000000000000'])
  t.same(problemsOf({ 'keys.yaml': `keys:\n  - { id: big, sha256: ${D1}, plan: enterprise, limits: { perMinute: 1.5, perDay: 10 } }\n` }),
    ['keys.yaml: keys[0].limits.perMinute: must be integer'])
  t.same(problemsOf({ 'plans.yaml': plansYaml({ free: { perMinute: MAX_PER_MINUTE, perDay: MAX_PER_DAY } }) }), [], 'the bounds themselves are accepted')
})

t.test('perDay below perMinute is a problem in a plan, in the anonymous policy and in a key\'s own limits', async (t) => {
  t.same(problemsOf({
    'plans.yaml': plansYaml({ pro: { perMinute: 1000, perDay: 2 }, anonymous: { perMinute: 30, perDay: 29 } }),
    'keys.yaml': `keys:\n  - { id: big, sha256: ${D1}, plan: enterprise, limits: { perMinute: 5000, perDay: 4999 } }\n`
  }), [
    'plans.yaml: plans.pro: perDay (2) must be at least perMinute (1000): a day holds every minute\'s requests',
    'plans.yaml: anonymous: perDay (29) must be at least perMinute (30): a day holds every minute\'s requests',
    'keys.yaml: keys[0].limits: perDay (4999) must be at least perMinute (5000): a day holds every minute\'s requests'
  ])
  t.same(problemsOf({ 'plans.yaml': plansYaml({ free: { perMinute: 7, perDay: 7 } }) }), [], 'equal is fine')
})

t.test('a ban\'s cap below its first duration is a problem, defaults named as such', async (t) => {
  t.same(problemsOf({ 'plans.yaml': plansYaml({ ban: { durationSeconds: 3600, maxDurationSeconds: 600 } }) }), [
    'plans.yaml: ban: maxDurationSeconds (600) must be at least durationSeconds (3600): the cap of a ban cannot be shorter than its first duration'
  ])
  const onlyCap = 'plans:\n  free: { perMinute: 1, perDay: 1 }\nanonymous: { perMinute: 1, perDay: 1 }\nban: { maxDurationSeconds: 600 }\n'
  t.same(problemsOf({ 'plans.yaml': onlyCap, 'keys.yaml': 'keys: []\n' }), [
    'plans.yaml: ban: maxDurationSeconds (600) must be at least durationSeconds (900, the default): the cap of a ban cannot be shorter than its first duration'
  ])
})

t.test('issue 22: an invalid value in one plan and a key naming a plan that does not exist are reported in one run', async (t) => {
  t.same(problemsOf({
    'plans.yaml': plansYaml({ free: { perMinute: 0, perDay: 1000 } }),
    'keys.yaml': `keys:\n  - { id: a, sha256: ${D1}, plan: free }\n  - { id: b, sha256: ${'b'.repeat(64)}, plan: gold }\n  - { id: c, sha256: ${'c'.repeat(64)}, plan: pro }\n`
  }), [
    'plans.yaml: plans.free.perMinute: must be >= 1',
    'keys.yaml: keys[1].plan: unknown plan "gold"'
  ], 'the key of the invalid plan is not reported again; the key of a good plan has no problem')
  // A plan whose entry fails a rule that spans its fields is known too.
  t.same(problemsOf({
    'plans.yaml': plansYaml({ free: { perMinute: 10, perDay: 5 } }),
    'keys.yaml': `keys:\n  - { id: a, sha256: ${D1}, plan: free }\n  - { id: b, sha256: ${'b'.repeat(64)}, plan: gold }\n`
  }), [
    'plans.yaml: plans.free: perDay (5) must be at least perMinute (10): a day holds every minute\'s requests',
    'keys.yaml: keys[1].plan: unknown plan "gold"'
  ])
})

t.test('a YAML alias bomb is a problem naming the file, not a thrown ReferenceError', async (t) => {
  const lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
  for (let i = 1; i < 10; i++) {
    const prev = String.fromCharCode(96 + i)
    lines.push(`${String.fromCharCode(97 + i)}: &${String.fromCharCode(97 + i)} [${Array(9).fill(`*${prev}`).join(',')}]`)
  }
  t.same(problemsOf({ 'keys.yaml': lines.join('\n') + '\nkeys: *j\n' }), [
    'keys.yaml: YAML that cannot be read: Excessive alias count indicates a resource exhaustion attack'
  ])
})
