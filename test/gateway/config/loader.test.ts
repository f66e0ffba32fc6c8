import t from 'tap'
import { cpSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseConfig } from '../../../src/gateway/config/loader.js'
import { loadConfigDir } from '../../../src/gateway/config/read-files.js'
import { assertNoDemoKeys } from '../../../src/gateway/config/demo-keys.js'
import { configProblems, configTexts, FIXTURE_CONFIG_DIR } from '../../helpers/config-fixture.js'

const D1 = 'a'.repeat(64)

const problemsOf = configProblems

t.test('the shipped config loads: four plans, anonymous policy, ban policy, routes', async (t) => {
  const snapshot = loadConfigDir(FIXTURE_CONFIG_DIR)
  t.same([...snapshot.plans.keys()], ['free', 'pro', 'business', 'enterprise'])
  t.same(snapshot.plans.get('free'), { perMinute: 60, perDay: 1000 })
  t.same(snapshot.plans.get('pro'), { perMinute: 300, perDay: 10000 })
  t.same(snapshot.plans.get('business'), { perMinute: 1000, perDay: 100000 })
  t.equal(snapshot.plans.get('enterprise'), undefined)
  t.same(snapshot.anonymous, { perMinute: 30, perDay: 300, ipv6Prefix: 64 })
  t.same(snapshot.ban, { threshold: 30, windowSeconds: 60, durationSeconds: 900, maxDurationSeconds: 86400 })
  t.same(snapshot.keysById.get('demo-enterprise')?.limits, { perMinute: 5000, perDay: 2000000 })
  t.same(snapshot.routes[0], { method: 'GET', path: '/v1/pets/:petId', stability: undefined, cost: 1, deprecated: { since: Date.UTC(2026, 10, 21), sunset: Date.UTC(2030, 11, 5), successor: '/v1/pets' } })
  t.equal(snapshot.routes[1]?.stability, 'experimental')
  t.ok(Object.isFrozen(snapshot))
  t.match(snapshot.version, /^[0-9a-f]{12}$/)
  t.equal(loadConfigDir(FIXTURE_CONFIG_DIR).version, snapshot.version, 'same files, same version')
})

t.test('other shape and cross-entry problems are named by file, path and reason', async (t) => {
  const cases: Array<[string, Parameters<typeof configTexts>[0], string]> = [
    ['digest not hex', { 'keys.yaml': 'keys:\n  - { id: a, sha256: NOTHEX, plan: free }\n' }, 'keys.yaml: keys[0].sha256: must match pattern "^[0-9a-f]{64}$"'],
    ['missing field', { 'keys.yaml': `keys:\n  - { id: a, sha256: ${D1} }\n` }, 'keys.yaml: keys[0]: missing field "plan"'],
    ['plan neither limited nor custom', { 'plans.yaml': 'plans:\n  free: { perMinute: 5 }\nanonymous: { perMinute: 1, perDay: 1 }\n', 'keys.yaml': 'keys: []\n' }, 'plans.yaml: plans.free: needs perMinute and perDay (perMonth optional), or custom: true (not both)'],
    ['duplicate route', { 'routes.yaml': 'routes:\n  - { method: GET, path: /v1/pets }\n  - { method: GET, path: /v1/pets }\n' }, 'routes.yaml: routes[1]: duplicate route GET /v1/pets'],
    ['impossible date', { 'routes.yaml': 'routes:\n  - { method: GET, path: /v1/pets, deprecated: { since: 2030-13-45, sunset: 2031-01-01 } }\n' }, 'routes.yaml: routes[0].deprecated: since and sunset must be real dates']
  ]
  for (const [name, overrides, message] of cases) {
    t.same(problemsOf(overrides), [message], name)
  }
})

const FIXTURES = join(import.meta.dirname, '..', '..', 'fixtures', 'bad-config')

t.test('one fixture per kind of bad config, each with its exact message', async (t) => {
  const expected: Record<string, string> = {
    'unknown-plan.keys.yaml': 'keys.yaml: keys[0].plan: unknown plan "gold"',
    'negative-limit.plans.yaml': 'plans.yaml: plans.free.perMinute: must be >= 1',
    'enterprise-without-limits.keys.yaml': 'keys.yaml: keys[0]: plan "enterprise" is custom, so the key needs limits: { perMinute, perDay }',
    'duplicate-id.keys.yaml': 'keys.yaml: keys[1].id: duplicate id "acme"',
    'duplicate-digest.keys.yaml': 'keys.yaml: keys[1].sha256: same digest as key "acme"',
    'malformed.keys.yaml': 'keys.yaml: malformed YAML at line 3, column 1: Flow map in block collection must be sufficiently indented and end with a }',
    'unknown-field.keys.yaml': 'keys.yaml: keys[0]: unknown field "colour"',
    'unknown-field.plans.yaml': 'plans.yaml: ban: unknown field "maxDurationSecs"',
    'bad-stability.routes.yaml': 'routes.yaml: routes[0].stability: must be one of "experimental", "beta"',
    'sunset-before-since.routes.yaml': 'routes.yaml: routes[0].deprecated.sunset: must not be before since'
  }
  for (const [fixture, message] of Object.entries(expected)) {
    const file = fixture.slice(fixture.indexOf('.') + 1) as 'plans.yaml' | 'keys.yaml' | 'routes.yaml'
    const overrides = { [file]: readFileSync(join(FIXTURES, fixture), 'utf8') }
    if (file === 'plans.yaml' && fixture.startsWith('negative')) overrides['keys.yaml'] = 'keys: []\n'
    t.same(problemsOf(overrides), [message], fixture)
  }
})

t.test('a missing file is named', async (t) => {
  const dir = t.testdir({ 'plans.yaml': 'plans: {}\n' })
  t.throws(() => loadConfigDir(dir), { name: 'ConfigError', message: `invalid config: keys.yaml: cannot read ${dir}/keys.yaml: ENOENT; routes.yaml: cannot read ${dir}/routes.yaml: ENOENT` })
})

t.test('demo keys are refused in production', async (t) => {
  t.throws(() => assertNoDemoKeys(loadConfigDir(FIXTURE_CONFIG_DIR)), {
    name: 'ConfigError',
    message: 'invalid config: keys.yaml: demo keys are configured (demo-free, demo-pro, demo-business, demo-enterprise); remove them before running with NODE_ENV=production'
  })
  t.doesNotThrow(() => assertNoDemoKeys(parseConfig(configTexts({ 'keys.yaml': `keys:\n  - { id: real, sha256: ${D1}, plan: pro }\n` }))))
})

t.test('credentials: consumer (default its own id), expiry and scopes are read into each record', async (t) => {
  const D2 = 'b'.repeat(64)
  const D3 = 'c'.repeat(64)
  const snapshot = parseConfig(configTexts({
    'keys.yaml': 'keys:\n' +
      `  - { id: acme-old, consumer: acme, sha256: ${D1}, plan: pro, expiresAt: 2030-01-02 }\n` +
      `  - { id: acme-new, consumer: acme, sha256: ${D2}, plan: pro, scopes: [read], expiresAt: "2030-01-02T03:04:05+01:00" }\n` +
      `  - { id: solo, sha256: ${D3}, plan: free, scopes: [write, read] }\n`
  }))
  const old = snapshot.keysById.get('acme-old')
  const rotated = snapshot.keysById.get('acme-new')
  const solo = snapshot.keysById.get('solo')
  t.equal(old?.consumerId, 'acme')
  t.equal(rotated?.consumerId, 'acme')
  t.equal(solo?.consumerId, 'solo', 'without `consumer` a key is its own consumer')
  t.equal(old?.expiresAt, Date.UTC(2030, 0, 2), 'a date alone is 00:00 UTC')
  t.equal(rotated?.expiresAt, Date.UTC(2030, 0, 2, 2, 4, 5), 'an offset is honoured')
  t.equal(solo?.expiresAt, undefined)
  t.same(rotated?.scopes, ['read'])
  t.same(solo?.scopes, ['read', 'write'])
  t.same(old?.scopes, ['read', 'write'], 'both scopes by default')
})

t.test('credentials of one consumer that disagree on plan or limits are refused, naming both entries', async (t) => {
  const D2 = 'b'.repeat(64)
  t.same(problemsOf({
    'keys.yaml': 'keys:\n' +
      `  - { id: acme-old, consumer: acme, sha256: ${D1}, plan: pro }\n` +
      `  - { id: acme-new, consumer: acme, sha256: ${D2}, plan: free }\n`
  }), ['keys.yaml: keys[1]: consumer "acme" has plan "free" (60/min, 1000/day) here but plan "pro" (300/min, 10000/day) ' +
    'in keys[0] ("acme-old"): credentials of one consumer must agree on plan and limits'])
  t.same(problemsOf({
    'keys.yaml': 'keys:\n' +
      `  - { id: big, sha256: ${D1}, plan: enterprise, limits: { perMinute: 10, perDay: 100 } }\n` +
      `  - { id: big-2, consumer: big, sha256: ${D2}, plan: enterprise, limits: { perMinute: 11, perDay: 100 } }\n`
  }), ['keys.yaml: keys[1]: consumer "big" has plan "enterprise" (11/min, 100/day) here but plan "enterprise" (10/min, 100/day) ' +
    'in keys[0] ("big"): credentials of one consumer must agree on plan and limits'])
  t.same(problemsOf({ 'keys.yaml': `keys:\n  - { id: a, sha256: ${D1}, plan: free, scopes: [admin] }\n` }),
    ['keys.yaml: keys[0].scopes[0]: must be one of "read", "write"'])
  t.same(problemsOf({ 'keys.yaml': `keys:\n  - { id: a, sha256: ${D1}, plan: free, expiresAt: 2030-02-31 }\n` }),
    ['keys.yaml: keys[0].expiresAt: "2030-02-31" is not a real date'])
})

t.test('every problem in one report: schema problems of all files first, then every check that can still run', async (t) => {
  const D2 = 'b'.repeat(64)
  // plans.yaml is broken, yet its plans are named: a key naming a plan that does not exist is reported
  // beside the bad values (a key of the invalid plan "free" is not: that plan's problem is reported).
  t.same(problemsOf({
    'plans.yaml': 'plans:\n  free: { perMinute: 0, perDay: 10 }\nanonymous: { perMinute: 1 }\n',
    'keys.yaml': 'keys:\n' +
      `  - { id: a, sha256: ${D1}, plan: free }\n` +
      `  - { id: a, sha256: ${D2}, plan: free }\n` +
      `  - { id: b, sha256: ${D1}, plan: gold, expiresAt: 2030-02-30 }\n`,
    'routes.yaml': 'routes:\n  - { method: GET, path: /v1/pets, stability: alpha }\n'
  }), [
    'plans.yaml: plans.free.perMinute: must be >= 1',
    'plans.yaml: anonymous: missing field "perDay"',
    'routes.yaml: routes[0].stability: must be one of "experimental", "beta"',
    'keys.yaml: keys[1].id: duplicate id "a"',
    'keys.yaml: keys[2].sha256: same digest as key "a"',
    'keys.yaml: keys[2].plan: unknown plan "gold"',
    'keys.yaml: keys[2].expiresAt: "2030-02-30" is not a real date'
  ])
  // keys.yaml and plans.yaml are fine in shape: an unknown plan is reported beside routes.yaml's schema problem.
  t.same(problemsOf({
    'keys.yaml': `keys:\n  - { id: a, sha256: ${D1}, plan: gold }\n  - { id: b, consumer: a, sha256: ${D2}, plan: pro }\n`,
    'routes.yaml': 'routes:\n  - { method: TRACE, path: /v1/pets }\n  - { method: GET, path: /v1/pets, deprecated: { since: 2030-01-01, sunset: 2029-01-01 } }\n'
  }), [
    'routes.yaml: routes[0].method: must be one of "GET", "POST", "PUT", "PATCH", "DELETE"',
    'keys.yaml: keys[0].plan: unknown plan "gold"',
    'keys.yaml: keys[1]: consumer "a" has plan "pro" (300/min, 10000/day) here but plan "gold" in keys[0] ("a"): credentials of one consumer must agree on plan and limits'
  ])
  // A malformed file hides nothing in the others.
  t.same(problemsOf({
    'plans.yaml': 'plans: { free: [\n',
    'keys.yaml': `keys:\n  - { id: a, sha256: ${D1}, plan: free }\n  - { id: a, sha256: ${D2}, plan: free }\n`
  }), [
    'plans.yaml: malformed YAML at line 2, column 1: Flow sequence in block collection must be sufficiently indented and end with a ]',
    'keys.yaml: keys[1].id: duplicate id "a"'
  ])
  t.same(problemsOf({ 'plans.yaml': 'plans: {}\nplans: {}\n' }), ['plans.yaml: malformed YAML at line 2, column 1: Map keys must be unique'], 'duplicate keys are errors')
})

t.test('dates stay strings (YAML 1.2 core schema: no timestamps)', async (t) => {
  const snapshot = parseConfig(configTexts({ 'keys.yaml': `keys:\n  - { id: a, sha256: ${D1}, plan: free, expiresAt: 2030-01-02 }\n` }))
  t.equal(snapshot.keysById.get('a')?.expiresAt, Date.UTC(2030, 0, 2))
  t.equal(snapshot.keysById.get('a')?.expiresHeader, 'Wed, 02 Jan 2030 00:00:00 GMT')
})

t.test('a report names the first 50 problems and counts the rest', async (t) => {
  const lines = ['keys:']
  for (let i = 0; i < 1234; i++) lines.push(`  - { id: k${i}, sha256: a${i.toString(16).padStart(63, '0')}, plan: gold }`)
  const problems = problemsOf({ 'keys.yaml': lines.join('\n') + '\n' })
  t.equal(problems.length, 51)
  t.equal(problems[0], 'keys.yaml: keys[0].plan: unknown plan "gold"')
  t.equal(problems[49], 'keys.yaml: keys[49].plan: unknown plan "gold"')
  t.equal(problems[50], '… and 1,184 more problems')
})

t.test('a file over CONFIG_MAX_BYTES is refused by its size, naming the file and the limit', async (t) => {
  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  writeFileSync(join(dir, 'plans.yaml'), `# ${'x'.repeat(2000)}\n` + readFileSync(join(FIXTURE_CONFIG_DIR, 'plans.yaml'), 'utf8'))
  const size = statSync(join(dir, 'plans.yaml')).size
  t.throws(() => loadConfigDir(dir, { maxBytes: 1024 }), {
    name: 'ConfigError',
    problems: [`plans.yaml: ${dir}/plans.yaml is ${size.toLocaleString('en-US')} bytes, over the limit of 1,024 bytes (CONFIG_MAX_BYTES)`]
  })
  t.equal(loadConfigDir(dir, { maxBytes: size }).plans.size, 4, 'a file exactly at the limit is read')
})
