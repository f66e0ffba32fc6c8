// The rehearsal of a plan change end to end, as ops would run it: two gateway processes on one real
// Redis, the Free plan given a lower shadow limit by a config reload, traffic from several consumers
// on both processes; every request is still admitted under the enforced limit, `plans
// shadow free` lists exactly the consumers whose counts crossed the shadow limit with their right
// counts, the metric counts the same total across the processes, and `keys usage` (either process)
// has every request of a consumer.
import t from 'tap'
import { cpSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { keyDigest } from '../../../src/gateway/auth/bearer.js'
import { startBackend } from '../../helpers/backend.js'
import { cliInProcess } from '../../helpers/cli.js'
import { ADMIN_JSON, bearer, FIXTURE_CONFIG_DIR, plansYaml } from '../../helpers/config-fixture.js'
import { until } from '../../helpers/poll.js'
import { freePort } from '../../helpers/ports.js'
import { gatewayProcessEnv, runEntry, waitForProcessHttp } from '../../helpers/processes.js'
import { startRedis } from '../../helpers/redis.js'
import { sampleValue, scrape } from '../../helpers/scrape.js'

const SHADOW_PER_MINUTE = 10
/** Requests each consumer sends: over, at, well over and under the shadow limit (all under the enforced 60/min). */
const TRAFFIC = { 'tenant-a': 15, 'tenant-b': 10, 'tenant-c': 25, 'tenant-d': 3 } as const
type Tenant = keyof typeof TRAFFIC
const keyOf = (tenant: Tenant): string => `psk_rehearsal_${tenant.replace('-', '_')}_0123456789abcdef`

const KEYS = ['keys:', ...Object.keys(TRAFFIC).map((id) => `  - { id: ${id}, sha256: ${keyDigest(keyOf(id as Tenant))}, plan: free }`), ''].join('\n')
const SHADOWED_PLANS = plansYaml().replace('free: { perMinute: 60, perDay: 1000 }', `free: { perMinute: 60, perDay: 1000, shadow: { perMinute: ${SHADOW_PER_MINUTE} } }`)

interface GatewayProcess { url: string, adminUrl: string }

t.test('two gateway processes rehearse a lower Free limit: all admitted, plans shadow lists exactly who crossed it', async (t) => {
  const redis = await startRedis(t)
  const backend = await startBackend(t)
  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  writeFileSync(join(dir, 'keys.yaml'), KEYS)

  const gateways: GatewayProcess[] = await Promise.all([0, 1].map(async () => {
    const env = gatewayProcessEnv({ port: await freePort(), adminPort: await freePort(), backendUrl: backend.url, configDir: dir, redisUrl: redis.url }, {
      HISTORY_FLUSH_MS: '200'
    })
    const proc = runEntry(t, 'src/gateway/server.ts', env)
    const adminUrl = `http://127.0.0.1:${env.ADMIN_PORT}`
    await waitForProcessHttp(proc, `${adminUrl}/readyz`, (status) => status === 200)
    return { url: `http://127.0.0.1:${env.GATEWAY_PORT}`, adminUrl }
  }))

  // The change being rehearsed, applied by a reload of each process (as a config watch would).
  writeFileSync(join(dir, 'plans.yaml'), SHADOWED_PLANS)
  for (const gw of gateways) {
    const res = await fetch(`${gw.adminUrl}/admin/reload`, { method: 'POST', headers: ADMIN_JSON })
    t.equal(res.status, 200, 'reloaded')
    await res.arrayBuffer()
  }

  const statuses: number[] = []
  // Each consumer through one process (two consumers each): the count a decision has is exact to the
  // request within a process; split over processes within a second, it also holds the units of the
  // other process's block not yet spent (docs/decisions.md §15), which a test of exact counts leaves out.
  await Promise.all(Object.entries(TRAFFIC).map(async ([tenant, n], c) => {
    for (let i = 0; i < n; i++) {
      const res = await fetch(`${gateways[c % 2]!.url}/v1/pets?limit=1`, { headers: bearer(keyOf(tenant as Tenant)) })
      await res.arrayBuffer()
      statuses.push(res.status)
      t.equal(res.headers.get('ratelimit-policy'), '"minute";q=60;w=60, "day";q=1000;w=86400', 'an unannounced shadow shows nothing')
    }
  }))
  t.equal(statuses.length, 53)
  t.ok(statuses.every((s) => s === 200), 'every request admitted under the enforced 60/min')

  // tenant-a: requests 11–15 of 15; tenant-c: 11–25 of 25; tenant-b stopped at the limit; tenant-d under it.
  const expected = [
    { consumerId: 'tenant-c', rejections: 15, admitted: 15 },
    { consumerId: 'tenant-a', rejections: 5, admitted: 5 }
  ]
  const adminOf = (gw: GatewayProcess): string[] => ['--admin', gw.adminUrl]
  const shadow = await until('both processes flushed', async () => {
    const res = await cliInProcess(['plans', 'shadow', 'free', '--json', ...adminOf(gateways[0]!)])
    const body = JSON.parse(res.stdout) as { consumers: number, rejections: number, top: Array<Record<string, unknown>> }
    return body.rejections === 20 ? body : undefined
  }, 10_000)
  t.equal(shadow.consumers, 2, 'exactly the consumers who crossed the shadow limit')
  t.match(shadow.top, expected)
  t.equal(shadow.top.length, 2)

  const table = await cliInProcess(['plans', 'shadow', 'free', ...adminOf(gateways[1]!)])
  t.equal(table.code, 0, table.stderr)
  const lines = table.stdout.trimEnd().split('\n')
  t.equal(lines[0], 'plan free: enforced 60/min, 1000/day; shadow 10/min')
  t.match(lines[1], /^since \S+: 2 consumers would have been rejected 20 times \(counts of every gateway process on this Redis\)$/)
  t.match(lines[3], /^tenant-c\s+15\s+15\s+\S+Z\s+\S+Z$/, 'the other process reads the same records')
  t.match(lines[4], /^tenant-a\s+5\s+5\s+\S+Z\s+\S+Z$/)
  t.equal(lines.length, 5)

  let shadowTotal = 0
  for (const gw of gateways) {
    const { samples } = await scrape(gw.adminUrl)
    shadowTotal += sampleValue(samples, 'gateway_shadow_rejections_total', { plan: 'free', window: 'minute' }) ?? NaN
    t.equal(sampleValue(samples, 'gateway_ratelimit_rejections_total', { plan: 'free', window: 'minute' }), 0, 'nothing enforced')
  }
  t.equal(shadowTotal, 20, 'the metric, summed over the processes, counts the same 20')

  const csv = await cliInProcess(['keys', 'usage', 'tenant-c', '--csv', '--from', new Date().toISOString().slice(0, 10), ...adminOf(gateways[1]!)])
  t.match(csv.stdout, /^date,consumer,plan,admitted,rejected,total,units,overage\n\d{4}-\d\d-\d\d,tenant-c,free,25,0,25,25,0\n$/, 'usage history: both processes\' requests, read from either')
})
