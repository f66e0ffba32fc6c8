// The history on the command line, against a running gateway's admin API: `keys usage` as a table
// and as CSV for billing (checked line by line), `keys show` ending with the last days, `plans
// shadow` as a table, and their refusals.
import t from 'tap'
import { formatShadow, table } from '../../src/cli/format-history.js'
import { startGateway, type StartedGateway } from '../helpers/gateway.js'
import { bearer, DEMO_KEYS, plansYaml, testConfig } from '../helpers/config-fixture.js'
import { cliInProcess } from '../helpers/cli.js'

async function send (gw: StartedGateway, key: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) await (await fetch(`${gw.url}/v1/pets?limit=1`, { headers: bearer(key) })).arrayBuffer()
}

t.test('keys usage: a table per UTC day with a total, --csv one line per day; keys show ends with the last 7 days', async (t) => {
  let clock = Date.UTC(2030, 0, 31, 22)
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': plansYaml({ free: { perMinute: 2, perDay: 1000 } }) }), now: () => clock })
  await send(gw, DEMO_KEYS.free, 3) // 2 admitted, 1 rejected on Jan 31
  clock = Date.UTC(2030, 1, 1, 9)
  await send(gw, DEMO_KEYS.free, 1)
  const admin = ['--admin', gw.adminUrl]

  const usage = await cliInProcess(['keys', 'usage', 'demo-free', '--from', '2030-01-30', '--to', '2030-02-01', ...admin])
  t.equal(usage.code, 0, usage.stderr)
  t.equal(usage.stdout, [
    'consumer demo-free (plan free): requests and units per UTC day, 2030-01-30 to 2030-02-01; counts of this gateway process only, since it started (in-process limiter store)',
    'date        admitted  units  rejected  total  overage',
    '2030-01-30         0      0         0      0        0',
    '2030-01-31         2      2         1      3        0',
    '2030-02-01         1      1         0      1        0',
    'total              3      3         1      4        0',
    'month 2030-01: 2 units (no monthly quota)',
    'month 2030-02: 1 unit (no monthly quota)',
    ''
  ].join('\n'))

  const csv = await cliInProcess(['keys', 'usage', 'demo-free', '--from', '2030-01-31', '--to', '2030-02-01', '--csv', ...admin])
  t.equal(csv.code, 0, csv.stderr)
  t.equal(csv.stdout, 'date,consumer,plan,admitted,rejected,total,units,overage\n2030-01-31,demo-free,free,2,1,3,2,0\n2030-02-01,demo-free,free,1,0,1,1,0\n')

  const json = await cliInProcess(['keys', 'usage', 'demo-free', '--json', ...admin])
  t.match(JSON.parse(json.stdout), { consumerId: 'demo-free', from: '2029-12-29', to: '2030-02-01', total: { admitted: 3, rejected: 1 } })

  const show = await cliInProcess(['keys', 'show', 'demo-free', ...admin])
  t.equal(show.code, 0, show.stderr)
  const lines = show.stdout.split('\n')
  const at = lines.indexOf('usage by UTC day (this gateway process only, since it started (in-process limiter store)):')
  t.ok(at > 0, 'keys show has the day-by-day section')
  t.same(lines.slice(at + 1, at + 9), [
    '  date        admitted  units  rejected  total  overage',
    '  2030-01-26         0      0         0      0        0',
    '  2030-01-27         0      0         0      0        0',
    '  2030-01-28         0      0         0      0        0',
    '  2030-01-29         0      0         0      0        0',
    '  2030-01-30         0      0         0      0        0',
    '  2030-01-31         2      2         1      3        0',
    '  2030-02-01         1      1         0      1        0'
  ])

  const refusals: Array<[string[], string]> = [
    [['keys', 'usage', 'demo-free', '--from', '31/01/2030', ...admin], 'petstore-gateway: --from must be a UTC date YYYY-MM-DD, got "31/01/2030" (petstore-gateway keys usage --help)'],
    [['keys', 'usage', 'demo-free', '--from', '2029-01-01', ...admin], 'petstore-gateway: the usage history keeps the last 35 days: from must be 2029-12-29 or later, got 2029-01-01'],
    [['keys', 'usage', ...admin], 'petstore-gateway: keys usage needs exactly one id (petstore-gateway keys usage --help)'],
    [['plans', 'shadow', ...admin], 'petstore-gateway: plans shadow needs exactly one plan (petstore-gateway plans shadow --help)'],
    [['plans', 'shadow', 'gold', ...admin], 'petstore-gateway: No plan named gold (known: free, pro, business, enterprise)']
  ]
  for (const [args, message] of refusals) {
    const res = await cliInProcess(args)
    t.equal(res.code, 1, args.join(' '))
    t.equal(res.stderr, `${message}\n`)
  }
})

t.test('plans shadow: the plan\'s limits and shadow, then who would have been rejected, top N', async (t) => {
  const clock = Date.UTC(2030, 2, 1, 10)
  const plans = plansYaml().replace('free: { perMinute: 60, perDay: 1000 }', 'free: { perMinute: 60, perDay: 1000, shadow: { perMinute: 1, announce: true } }')
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': plans }), now: () => clock })
  await send(gw, DEMO_KEYS.free, 4)
  const res = await cliInProcess(['plans', 'shadow', 'free', '--admin', gw.adminUrl])
  t.equal(res.code, 0, res.stderr)
  const at = new Date(clock).toISOString()
  t.equal(res.stdout, [
    'plan free: enforced 60/min, 1000/day; shadow 1/min (announced)',
    `since 2030-02-28T10:00:00.000Z: 1 consumers would have been rejected 3 times (counts of this gateway process only, since it started (in-process limiter store))`,
    'consumer   would-reject  admitted-now  first                     last',
    `demo-free             3             3  ${at}  ${at}`,
    ''
  ].join('\n'))
  const none = await cliInProcess(['plans', 'shadow', 'pro', '--admin', gw.adminUrl])
  t.match(none.stdout, /^plan pro: enforced 300\/min, 10000\/day; no shadow in the config now\nsince \S+: 0 consumers would have been rejected 0 times/)
})

t.test('the tables read defensively: a field an older gateway lacks prints as "?"', async (t) => {
  t.same(formatShadow({ plan: 'enterprise', limits: 'custom', top: [{ consumerId: 'x' }] }), [
    'plan enterprise: custom plan: each key\'s own limits and shadow',
    'since ?: ? consumers would have been rejected ? times (counts of ?)',
    'consumer  would-reject  admitted-now  first  last',
    'x         ?             ?             ?      ?'
  ])
  t.same(table(['a', 'n'], [['x', '1'], ['yy', '22']]), ['a    n', 'x    1', 'yy  22'])
})

t.test('plans shadow says when the records dropped consumers: the count is an estimate, and how many rejections are in no one\'s count', async (t) => {
  t.same(formatShadow({ plan: 'free', limits: { perMinute: 60, perDay: 1000 }, shadow: { perMinute: 2 }, since: 'S', counts: 'C', consumers: 30_192, rejections: 615_000, complete: false, untracked: 580_000, top: [] }), [
    'plan free: enforced 60/min, 1000/day; shadow 2/min',
    'since S: about 30192 consumers would have been rejected 615000 times (counts of C)',
    'some hours had more consumers than their records keep: the lightest were dropped, 580000 of those rejections are not in any consumer\'s count'
  ])
})
