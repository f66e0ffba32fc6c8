// What the long outages (outage-long-*.test.ts) point at, on its own: a busy consumer's reserve is what
// STORE_ON_ERROR=strict answers from while Redis is out, whichever way Redis goes. One gateway, one
// consumer at 20 requests/s far below its limit (100,000/min: room for far more than a minute), Redis
// holding a reserve for it; then Redis frozen (SIGSTOP) or killed (SIGKILL) for 2 s while the consumer
// keeps its rate. Under strict every admission in the outage comes from the reserve, so each of the
// 40 requests must be 200 and counted as a reserve admission — frozen and killed alike.
import t, { type Test } from 'tap'
import { startBackend } from '../../helpers/backend.js'
import { startGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS, plansYaml, testConfig } from '../../helpers/config-fixture.js'
import { poll, sleep } from '../../helpers/poll.js'
import { reserveUnits, startRedis } from '../../helpers/redis.js'
import { parseScrape, sampleValue } from '../../helpers/scrape.js'
import { FIELD } from '../../../src/gateway/limiter/redis/layout.js'

const RATE = 20
const OUTAGE_MS = 2_000

async function throughFault (t: Test, fault: 'freeze' | 'kill'): Promise<{ statuses: Record<number, number>, reserveBefore: number, reserveAdmissions: number }> {
  const redis = await startRedis(t)
  t.teardown(() => redis.signal('SIGCONT'))
  const backend = await startBackend(t)
  const gw = await startGateway(t, {
    backendUrl: backend.url,
    config: testConfig({ 'plans.yaml': plansYaml({ business: { perMinute: 100_000, perDay: 1_000_000 } }) }),
    limiter: { settings: { redisUrl: redis.url, storeOnError: 'strict', storeProcesses: 1 } }
  })
  const statuses: Record<number, number> = {}
  let counting = false
  const inFlight: Array<Promise<void>> = []
  let stopped = false
  const sender = (async () => {
    const start = performance.now()
    for (let sent = 0; !stopped; sent++) {
      const due = start + sent * 1000 / RATE
      await sleep(Math.max(0, due - performance.now()))
      const counted = counting
      inFlight.push((async () => {
        let status = 0
        try { const res = await fetch(`${gw.url}/v1/pets?limit=1`, { headers: bearer(DEMO_KEYS.business) }); await res.arrayBuffer(); status = res.status } catch { /* 0 */ }
        if (counted) statuses[status] = (statuses[status] ?? 0) + 1
      })())
    }
  })()
  const reserveBefore = await poll(async () => { const units = reserveUnits(await redis.cli('HGET', 'rl:{demo-business}', FIELD.reserves)); return units > OUTAGE_MS / 1000 * RATE * 2 ? units : undefined }, 15_000) ?? 0
  counting = true
  if (fault === 'freeze') redis.signal('SIGSTOP')
  else { redis.signal('SIGKILL'); await redis.stop() }
  await sleep(OUTAGE_MS)
  counting = false
  stopped = true
  await sender
  await Promise.all(inFlight)
  const scrape = parseScrape(await (await fetch(`${gw.adminUrl}/metrics`)).text())
  if (fault === 'freeze') redis.signal('SIGCONT')
  return { statuses, reserveBefore, reserveAdmissions: sampleValue(scrape, 'gateway_store_outage_admissions_total', { kind: 'reserve' }) ?? 0 }
}

for (const fault of ['freeze', 'kill'] as const) {
  t.test(`strict: Redis ${fault === 'freeze' ? 'frozen' : 'killed'} for 2 s; a busy consumer is answered from its reserve`, async (t) => {
    const r = await throughFault(t, fault)
    const sent = Object.values(r.statuses).reduce((n, c) => n + c, 0)
    t.comment(`${fault}: reserve in Redis before ${r.reserveBefore}; statuses during the outage ${JSON.stringify(r.statuses)}; reserve admissions ${r.reserveAdmissions}`)
    t.ok(sent >= 5, `requests went on during the outage (${sent}; ${OUTAGE_MS / 1000 * RATE} at the full rate)`)
    t.ok(r.reserveBefore > 0, `Redis kept a reserve for the consumer (${r.reserveBefore} units)`)
    t.equal(r.statuses[200] ?? 0, sent, `every request during the outage answered 200 (${JSON.stringify(r.statuses)})`)
    t.ok(r.reserveAdmissions >= (r.statuses[200] ?? 0) - RATE, `admitted from the reserve (${r.reserveAdmissions} reserve admissions; at most a second's pool besides)`)
  })
}
