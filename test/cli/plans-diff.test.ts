// `plans diff DIR` against a running gateway: per plan, the limits in force → the new ones (a shadow
// added, a limit lowered, a new plan), with the consumers DIR configures on each; a custom plan's
// consumer whose own limits change; nothing to say for an identical directory; a DIR that does not
// load is its problems, exit 1.
import t from 'tap'
import { cpSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { cliInProcess } from '../helpers/cli.js'
import { plansDiff } from '../../src/cli/plans-diff.js'
import { startGateway } from '../helpers/gateway.js'
import { FIXTURE_CONFIG_DIR, plansYaml, testConfig } from '../helpers/config-fixture.js'

t.test('plans diff: which limits change, shadow included, and for how many consumers', async (t) => {
  const gw = await startGateway(t)
  const admin = ['--admin', gw.adminUrl]
  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })

  const same = await cliInProcess(['plans', 'diff', dir, ...admin])
  t.equal(same.code, 0, same.stderr)
  t.equal(same.stdout, [
    `${dir} against the running gateway (config version ${gw.app.gatewayConfig.current.version}):`,
    '  free: unchanged, 60/min, 1000/day (1 consumer in the new config)',
    '  pro: unchanged, 300/min, 10000/day (1 consumer in the new config)',
    '  business: unchanged, 1000/min, 100000/day (1 consumer in the new config)',
    '  enterprise (custom: limits per consumer): unchanged',
    'no limit changes',
    ''
  ].join('\n'))

  const plans = readFileSync(join(dir, 'plans.yaml'), 'utf8')
    .replace('free:       { perMinute: 60,   perDay: 1000 }', 'free: { perMinute: 60, perDay: 1000, shadow: { perMinute: 30, announce: true } }')
    .replace('pro:        { perMinute: 300,  perDay: 10000 }', 'pro: { perMinute: 200, perDay: 10000 }\n  gold: { perMinute: 2000, perDay: 200000 }')
  writeFileSync(join(dir, 'plans.yaml'), plans)
  const keys = readFileSync(join(dir, 'keys.yaml'), 'utf8')
    .replace('limits: { perMinute: 5000, perDay: 2000000 }', 'limits: { perMinute: 5000, perDay: 2000000, shadow: { perDay: 1000000 } }')
  writeFileSync(join(dir, 'keys.yaml'), `${keys}  - { id: free-2, consumer: newcomer, sha256: ${'ab'.repeat(32)}, plan: free }\n`)

  const diff = await cliInProcess(['plans', 'diff', dir, ...admin])
  t.equal(diff.code, 0, diff.stderr)
  t.equal(diff.stdout, [
    `${dir} against the running gateway (config version ${gw.app.gatewayConfig.current.version}):`,
    '  free: 60/min, 1000/day → 60/min, shadow 30/min, 1000/day, announced (2 consumers in the new config)',
    '  pro: 300/min, 10000/day → 200/min, 10000/day (1 consumer in the new config)',
    '  business: unchanged, 1000/min, 100000/day (1 consumer in the new config)',
    '  enterprise (custom: limits per consumer): 1 of 1 consumer change',
    '    demo-enterprise: 5000/min, 2000000/day → 5000/min, 2000000/day, shadow 1000000/day',
    '  gold: new plan, 2000/min, 200000/day (0 consumers in the new config)',
    ''
  ].join('\n'))

  writeFileSync(join(dir, 'plans.yaml'), plans.replace('shadow: { perMinute: 30, announce: true }', 'shadow: { perMinute: 60 }'))
  const bad = await cliInProcess(['plans', 'diff', dir, ...admin])
  t.equal(bad.code, 1)
  t.match(bad.stderr, 'petstore-gateway: plans.yaml: plans.free.shadow.perMinute: 60 equals the enforced perMinute')
  t.equal(bad.stdout, '')
})

t.test('plans diff covers the month: a quota added, its overage rule, an Enterprise key\'s own quota, and the routes\' cost', async (t) => {
  const gw = await startGateway(t)
  const admin = ['--admin', gw.adminUrl]
  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  const plans = readFileSync(join(dir, 'plans.yaml'), 'utf8')
    .replace('free:       { perMinute: 60,   perDay: 1000 }', 'free: { perMinute: 60, perDay: 1000, perMonth: 20000 }')
    .replace('pro:        { perMinute: 300,  perDay: 10000 }', 'pro: { perMinute: 300, perDay: 10000, perMonth: 200000, overage: allow }')
  writeFileSync(join(dir, 'plans.yaml'), plans)
  const keys = readFileSync(join(dir, 'keys.yaml'), 'utf8')
    .replace('limits: { perMinute: 5000, perDay: 2000000 }', 'limits: { perMinute: 5000, perDay: 2000000, perMonth: 50000000 }')
  writeFileSync(join(dir, 'keys.yaml'), keys)
  writeFileSync(join(dir, 'routes.yaml'), `${readFileSync(join(dir, 'routes.yaml'), 'utf8')}  - { method: POST, path: /v1/pets, cost: 5 }\n`)

  const diff = await cliInProcess(['plans', 'diff', dir, ...admin])
  t.equal(diff.code, 0, diff.stderr)
  t.equal(diff.stdout, [
    `${dir} against the running gateway (config version ${gw.app.gatewayConfig.current.version}):`,
    '  free: 60/min, 1000/day → 60/min, 1000/day, 20000/month (1 consumer in the new config)',
    '  pro: 300/min, 10000/day → 300/min, 10000/day, 200000/month (overage allowed) (1 consumer in the new config)',
    '  business: unchanged, 1000/min, 100000/day (1 consumer in the new config)',
    '  enterprise (custom: limits per consumer): 1 of 1 consumer change',
    '    demo-enterprise: 5000/min, 2000000/day → 5000/min, 2000000/day, 50000000/month',
    '  route cost: POST /v1/pets 1 → 5 units per request',
    ''
  ].join('\n'))

  // The same directory against a gateway running it: nothing changes, the quota and the cost included.
  const running = await startGateway(t, { reload: { dir, watch: false } })
  const same = await cliInProcess(['plans', 'diff', dir, '--admin', running.adminUrl])
  t.equal(same.code, 0, same.stderr)
  t.match(same.stdout, / {2}pro: unchanged, 300\/min, 10000\/day, 200000\/month \(overage allowed\)/)
  t.notMatch(same.stdout, /route cost/)
  t.match(same.stdout, /no limit changes\n$/)

  // Only the overage rule changes: block → allow is a change.
  writeFileSync(join(dir, 'plans.yaml'), plans.replace('perMonth: 20000 }', 'perMonth: 20000, overage: allow }'))
  const soft = await cliInProcess(['plans', 'diff', dir, '--admin', running.adminUrl])
  t.match(soft.stdout, / {2}free: 60\/min, 1000\/day, 20000\/month → 60\/min, 1000\/day, 20000\/month \(overage allowed\)/)
})

// The comparison itself, against a running side given as the admin API would describe an older or
// differently configured gateway: the cases a gateway running the fixture cannot show.
t.test('plans diff against an older gateway: plans removed (fixed or custom), a custom plan made fixed, the anonymous limits, and route costs it does not report', async (t) => {
  const routes = `${readFileSync(join(FIXTURE_CONFIG_DIR, 'routes.yaml'), 'utf8')}  - { method: POST, path: /v1/pets, cost: 5 }\n`
  const next = testConfig({ 'plans.yaml': plansYaml({ anonymous: { perMinute: 20, perDay: 300 } }), 'routes.yaml': routes })
  const enterpriseKey = [...next.keysById.values()].find((key) => key.plan === 'enterprise')
  const asked: string[] = []
  const diff = await plansDiff({
    plans: {
      free: { perMinute: 60, perDay: 1000 },
      pro: 'custom',
      business: { perMinute: 1000, perDay: 100000 },
      enterprise: 'custom',
      legacy: { perMinute: 10, perDay: 100 },
      partners: 'custom'
    },
    anonymous: { perMinute: 30, perDay: 300 }
  }, next, async (consumerId) => { asked.push(consumerId); return enterpriseKey?.limits })
  t.same(diff.lines, [
    '  free: unchanged, 60/min, 1000/day (1 consumer in the new config)',
    '  pro: custom → 300/min, 10000/day (1 consumer in the new config)',
    '  business: unchanged, 1000/min, 100000/day (1 consumer in the new config)',
    '  enterprise (custom: limits per consumer): unchanged',
    '  legacy: removed (was 10/min, 100/day)',
    '  partners: removed (was custom)',
    '  anonymous (per client address): 30/min, 300/day → 20/min, 300/day',
    '  route costs: the running gateway does not say its own; the new config sets POST /v1/pets 5'
  ])
  t.equal(diff.changed, true)
  t.same(asked, [enterpriseKey?.consumerId], 'only the custom plan\'s consumers are looked up')

  const unchanged = await plansDiff({
    plans: { free: { perMinute: 60, perDay: 1000 }, pro: { perMinute: 300, perDay: 10000 }, business: { perMinute: 1000, perDay: 100000 }, enterprise: 'custom' },
    anonymous: { perMinute: 20, perDay: 300 },
    costs: { 'POST /v1/pets': 5 }
  }, next, async () => enterpriseKey?.limits)
  t.equal(unchanged.changed, false, 'the same plans, anonymous limits and costs: nothing changes')
  t.same(unchanged.lines.filter((line) => !line.includes('unchanged')), [], 'every line says so')
})
