// The month boundary on an injected clock, through a real gateway on the in-process store: a quota
// used up on the 31st stays used up until 23:59:59.999 UTC and frees at 00:00:00.000 UTC on the 1st,
// not a millisecond before — whatever time zone the machine has. The body runs in child processes
// under TZ=Pacific/Kiritimati (UTC+14: already the 1st there 14 hours before), TZ=America/Adak
// (UTC−9 in April, daylight time: still the 31st there 9 hours after) and TZ=UTC; each checks first
// that its zone took. Each zone is a process of its own (a gateway started under it): `npm test` runs
// the two zones on either side of UTC, where a local-time boundary would be 14 hours early or 9 hours
// late; `npm run test:long` adds TZ=UTC, where local and UTC agree (test/gateway/limiter/quota-gateway.test.ts
// checks the boundary in the machine's zone too).
import t from 'tap'
import { startGateway } from '../../helpers/gateway.js'
import { DEMO_KEYS, testConfig } from '../../helpers/config-fixture.js'
import { longOr } from '../../helpers/long.js'
import { call, METERED_PLANS, unix } from '../../helpers/quota.js'

/** Date.getTimezoneOffset() at the boundary in each zone (minutes behind UTC). */
const ZONES: Record<string, number> = { 'Pacific/Kiritimati': -14 * 60, 'America/Adak': 9 * 60, UTC: 0 }
const CHILD = 'QUOTA_BOUNDARY_CHILD'

if (process.env[CHILD] === undefined) {
  for (const zone of longOr(['Pacific/Kiritimati', 'America/Adak'], Object.keys(ZONES))) {
    t.spawn(process.execPath, [...process.execArgv, import.meta.filename], { env: { ...process.env, TZ: zone, [CHILD]: '1' } }, `TZ=${zone}`)
  }
} else {
  t.test(`the quota frees at 00:00 UTC on the 1st (TZ=${process.env.TZ ?? ''})`, async (t) => {
    const end = Date.parse('2030-04-01T00:00:00.000Z')
    t.equal(new Date(end).getTimezoneOffset(), ZONES[process.env.TZ ?? ''], `the machine's zone is ${process.env.TZ ?? ''}`)
    let clock = Date.parse('2030-03-30T10:00:00Z')
    const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': METERED_PLANS }), now: () => clock })
    // free: 20 a month, 15 a day. 10 on the 30th, 10 late on the 31st: the month is out, the day is not.
    for (let i = 0; i < 10; i++) await call(gw, DEMO_KEYS.free)
    clock = Date.parse('2030-03-31T23:58:30Z')
    for (let i = 0; i < 10; i++) await call(gw, DEMO_KEYS.free)

    clock = Date.parse('2030-03-31T23:59:00Z')
    t.match(await call(gw, DEMO_KEYS.free), { status: 429, code: 'quota_exceeded', headers: { 'retry-after': '60' } }, '23:59 UTC: a minute to go (the minute is full too, and frees sooner)')
    clock = end - 1
    const last = await call(gw, DEMO_KEYS.free)
    t.match(last, { status: 429, code: 'quota_exceeded', headers: { 'retry-after': '1', 'x-ratelimit-reset': String(unix('2030-04-01T00:00:00Z')), ratelimit: '"month";r=0;t=1' } }, '23:59:59.999 UTC: still March\'s quota')
    t.match(last.headers['ratelimit-policy'], /"month";q=20;w=2678400$/, 'March: 31 days')
    clock = end
    const first = await call(gw, DEMO_KEYS.free)
    t.equal(first.status, 200, '00:00:00.000 UTC on the 1st: April\'s quota')
    t.match(first.headers, { 'x-ratelimit-limit': '15', 'x-ratelimit-remaining': '4' }, 'the day (11 of 15) binds now, not the month (1 of 20)')
    t.match(first.headers['ratelimit-policy'], /"month";q=20;w=2592000$/, 'April: 30 days')
    const admin = await (await fetch(`${gw.adminUrl}/admin/consumers/demo-free`)).json() as { usage: { month: unknown } }
    t.match(admin.usage.month, { count: 1, limit: 20, remaining: 19, resetAt: '2030-05-01T00:00:00.000Z' })
  })
}
