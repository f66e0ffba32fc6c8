// The month on the command line, against a running gateway with monthly quotas, a soft quota past
// its perMonth and a route of cost 5 (test/helpers/quota.ts replays the month): `keys show` prints
// the month against the quota (and the overage past a soft one), `keys usage` the units and overage
// per day and each month the range touches, `--csv` the units and overage columns for billing, and
// `keys reset` says the month's units it gave back.
import t from 'tap'
import { cliInProcess } from '../helpers/cli.js'
import { meteredMonth } from '../helpers/quota.js'

const SCOPE = 'this gateway process only, since it started (in-process limiter store)'

t.test('keys show, keys usage (table and CSV) and keys reset with monthly quotas', async (t) => {
  const { gw, at } = await meteredMonth(t)
  const admin = ['--admin', gw.adminUrl]

  const soft = await cliInProcess(['keys', 'show', 'demo-business', ...admin])
  t.equal(soft.code, 0, soft.stderr)
  const softLines = soft.stdout.split('\n')
  t.equal(softLines[0], 'consumer demo-business: plan business (10/min, 20/day, 20/month (overage allowed))')
  t.equal(softLines[3], 'usage: minute 0/10 (10 left, resets 2030-03-31T23:01:30.000Z); day 10/20 (10 left, resets 2030-04-01T12:15:00.000Z); ' +
    'month 30/20 (150 %, 10 over the quota (overage allowed: billed), renews 2030-04-01T00:00:00.000Z)')
  const hard = await cliInProcess(['keys', 'show', 'demo-free', ...admin])
  t.match(hard.stdout, /^consumer demo-free: plan free \(10\/min, 15\/day, 20\/month\)\n/)
  t.match(hard.stdout, /; month 20\/20 \(100 %, 0 left, renews 2030-04-01T00:00:00\.000Z\)\n/)
  const none = await cliInProcess(['keys', 'show', 'demo-pro', ...admin])
  t.match(none.stdout, /; month 0\/10 \(0 %, 10 left, renews 2030-04-01T00:00:00\.000Z\)\n/)

  const usage = await cliInProcess(['keys', 'usage', 'demo-business', '--from', '2030-03-28', '--to', '2030-03-31', ...admin])
  t.equal(usage.code, 0, usage.stderr)
  t.equal(usage.stdout, [
    `consumer demo-business (plan business): requests and units per UTC day, 2030-03-28 to 2030-03-31; counts of ${SCOPE}`,
    'date        admitted  units  rejected  total  overage',
    '2030-03-28         0      0         0      0        0',
    '2030-03-29        10     10         0     10        0',
    '2030-03-30        10     10         0     10        0',
    '2030-03-31         6     10         1      7       10',
    'total             26     30         1     27       10',
    'month 2030-03: 30 units of a quota of 20/month, 10 over (overage allowed: billed)',
    ''
  ].join('\n'))

  const csv = await cliInProcess(['keys', 'usage', 'demo-business', '--from', '2030-03-29', '--to', '2030-03-31', '--csv', ...admin])
  t.equal(csv.stdout, [
    'date,consumer,plan,admitted,rejected,total,units,overage',
    '2030-03-29,demo-business,business,10,0,10,10,0',
    '2030-03-30,demo-business,business,10,0,10,10,0',
    '2030-03-31,demo-business,business,6,1,7,10,10',
    ''
  ].join('\n'), 'the month\'s days for billing: units and overage as the last columns')

  const reset = await cliInProcess(['keys', 'reset', 'demo-free', ...admin])
  t.equal(reset.stdout, 'consumer demo-free reset: cleared 10 requests this minute, 10 today, 20 units this month; not banned; escalation level none before the reset\n',
    'a reset gives the month back, and says so')

  // Two days into April: the default range (35 days) touches February, March and April.
  at('2030-04-02T10:00:00Z')
  const later = await cliInProcess(['keys', 'usage', 'demo-business', ...admin])
  t.same(later.stdout.split('\n').slice(-4), [
    'month 2030-02: 0 units of a quota of 20/month (overage allowed)',
    'month 2030-03: 30 units of a quota of 20/month, 10 over (overage allowed: billed)',
    'month 2030-04: 0 units of a quota of 20/month (overage allowed)',
    ''
  ])
})
