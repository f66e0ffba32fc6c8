// Keys that expire: the gateway_keys_expiring{within="7d"} / gateway_keys_expired gauges follow the
// gateway clock at scrape time (no reload needed when a date passes), and start and reload log the
// keys expiring within 7 days in one capped line.
import { cpSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { keyDigest } from '../../../src/gateway/auth/bearer.js'
import { startGateway } from '../../helpers/gateway.js'
import { ADMIN_JSON, FIXTURE_CONFIG_DIR, testConfig } from '../../helpers/config-fixture.js'
import { sampleValue, scrape } from '../../helpers/scrape.js'

const NOW = Date.parse('2030-03-01T00:00:00Z')
const DAY = 86_400_000

function entry (id: string, extra = ''): string {
  return `  - { id: ${id}, sha256: ${keyDigest(`psk_${id}_test_key_material_xxxxxxxxxx`)}, plan: free${extra} }`
}

const KEYS = [
  'keys:',
  entry('in-3-days', ', expiresAt: "2030-03-04T00:00:00Z"'),
  entry('in-6-days', ', expiresAt: "2030-03-07"'),
  entry('in-30-days', ', expiresAt: "2030-03-31"'),
  entry('expired', ', expiresAt: "2030-02-01"'),
  entry('expired-disabled', ', expiresAt: "2030-02-01", disabled: true'),
  entry('never'),
  ''
].join('\n')

async function gauges (adminUrl: string): Promise<[number | undefined, number | undefined]> {
  const { samples } = await scrape(adminUrl)
  return [sampleValue(samples, 'gateway_keys_expiring', { within: '7d' }), sampleValue(samples, 'gateway_keys_expired')]
}

t.test('expiry gauges are computed at scrape time from the config in force and the clock', async (t) => {
  const clock = { now: NOW }
  const gw = await startGateway(t, { config: testConfig({ 'keys.yaml': KEYS }), now: () => clock.now })
  t.same(await gauges(gw.adminUrl), [2, 1], 'two within 7 days (3 and 6), one expired (the disabled one is not counted)')
  clock.now = NOW + 4 * DAY
  t.same(await gauges(gw.adminUrl), [1, 2], 'four days later: the 3-day key has expired')
  clock.now = NOW + 25 * DAY
  t.same(await gauges(gw.adminUrl), [1, 3], 'the 30-day key is now within 7 days')
  clock.now = NOW + 40 * DAY
  t.same(await gauges(gw.adminUrl), [0, 4])
})

t.test('start and reload log the keys expiring within 7 days, capped', async (t) => {
  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  writeFileSync(join(dir, 'keys.yaml'), KEYS)
  const gw = await startGateway(t, { reload: { dir, watch: false }, now: () => NOW })
  const atStart = gw.logs.filter((l) => l.msg === 'keys expiring within 7 days')
  t.equal(atStart.length, 1, 'one line at start')
  t.match(atStart[0], {
    level: 40,
    count: 2,
    truncated: false,
    keys: [
      { id: 'in-3-days', consumer: 'in-3-days', expiresAt: '2030-03-04T00:00:00.000Z' },
      { id: 'in-6-days', consumer: 'in-6-days', expiresAt: '2030-03-07T00:00:00.000Z' }
    ]
  })
  t.equal((atStart[0]?.keys as unknown[]).length, 2)

  const many = ['keys:', ...Array.from({ length: 25 }, (_, i) => entry(`k${String(i).padStart(2, '0')}`, `, expiresAt: "2030-03-0${2 + (i % 5)}"`)), '']
  writeFileSync(join(dir, 'keys.yaml'), many.join('\n'))
  const res = await fetch(`${gw.adminUrl}/admin/reload`, { method: 'POST', headers: ADMIN_JSON })
  t.equal(res.status, 200)
  await res.arrayBuffer()
  const lines = gw.logs.filter((l) => l.msg === 'keys expiring within 7 days')
  t.equal(lines.length, 2, 'one more line on reload')
  t.match(lines[1], { count: 25, truncated: true })
  t.equal((lines[1]?.keys as unknown[]).length, 20, 'at most 20 ids')
})

t.test('no line when nothing expires soon', async (t) => {
  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  const gw = await startGateway(t, { reload: { dir, watch: false } })
  t.equal(gw.logs.filter((l) => l.msg === 'keys expiring within 7 days').length, 0)
  t.same(await gauges(gw.adminUrl), [0, 0], 'the gauges exist at 0')
})
