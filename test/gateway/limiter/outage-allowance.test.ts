// STORE_ON_ERROR=local's outage allowance, on one gateway and a real redis-server frozen with
// SIGSTOP: a consumer seen once before the outage (no reserve: it was not busy) is admitted from
// the allowance — floor(STORE_OUTAGE_ALLOWANCE_PERCENT % of its minute limit ÷ STORE_PROCESSES), no
// more — each answer's X-RateLimit-Remaining counting down what this process may still admit, the
// admissions counted in gateway_store_outage_admissions_total{kind="allowance"} and written back into
// Redis once it answers again. Under STORE_ON_ERROR=strict the same requests are 503.
import t, { type Test } from 'tap'
import { startBackend } from '../../helpers/backend.js'
import { startGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS } from '../../helpers/config-fixture.js'
import { poll, sleep } from '../../helpers/poll.js'
import { startRedis } from '../../helpers/redis.js'
import { parseScrape, sampleValue } from '../../helpers/scrape.js'
import type { StoreOnError } from '../../../src/gateway/limiter/redis/outage.js'
import { FIELD } from '../../../src/gateway/limiter/redis/layout.js'

/** 1 % of the business plan's 1,000/min, one process: 10 units. */
const PERCENT = 1
const ALLOWANCE = 10
/** No data is lost here: a short barrier keeps each refusal's wait for Redis (half of it, at least STORE_TIMEOUT_MS) to 250 ms. */
const BARRIER_MS = 500
/** Below a minute's room at the consumer's rate (1,000/min ≈ 16/s): the allowance is not refused as racing. */
const GAP_MS = 150

async function run (t: Test, policy: StoreOnError): Promise<{ statuses: number[], remaining: number[], before: number, counted: () => Promise<number>, allowance: number | undefined, resume: () => void }> {
  const redis = await startRedis(t)
  t.teardown(() => redis.signal('SIGCONT'))
  const backend = await startBackend(t)
  const gw = await startGateway(t, { backendUrl: backend.url, limiter: { settings: { redisUrl: redis.url, storeOnError: policy, storeOutageAllowancePercent: PERCENT, storeProcesses: 1, recoveryBarrierMs: BARRIER_MS } } })
  const get = async (): Promise<Response> => { const res = await fetch(`${gw.url}/v1/pets?limit=1`, { headers: bearer(DEMO_KEYS.business) }); await res.arrayBuffer(); return res }
  const first = await get()
  const before = Number(first.headers.get('x-ratelimit-remaining'))
  redis.signal('SIGSTOP')
  const statuses: number[] = []
  const remaining: number[] = []
  for (let i = 0; i < ALLOWANCE + 3; i++) {
    const res = await get()
    statuses.push(res.status)
    if (res.status === 200) remaining.push(Number(res.headers.get('x-ratelimit-remaining')))
    await sleep(GAP_MS)
  }
  const scrape = parseScrape(await (await fetch(`${gw.adminUrl}/metrics`)).text())
  return {
    statuses,
    remaining,
    before,
    allowance: sampleValue(scrape, 'gateway_store_outage_admissions_total', { kind: 'allowance' }),
    counted: async () => Number(await redis.cli('HGET', 'rl:{demo-business}', FIELD.minuteUnits)),
    resume: () => { redis.signal('SIGCONT') }
  }
}

t.test('local: a consumer without a reserve is admitted from the allowance, no more, with honest headers, and it is written back', async (t) => {
  const r = await run(t, 'local')
  t.comment(`statuses ${r.statuses.join(' ')}; remaining ${r.remaining.join(' ')}; before the outage ${r.before}`)
  t.equal(r.statuses.filter((s) => s === 200).length, ALLOWANCE, `${ALLOWANCE} admitted from the allowance while Redis is frozen`)
  t.same(r.statuses.slice(ALLOWANCE), [503, 503, 503], 'then 503: the allowance is spent')
  t.same(r.remaining, Array.from({ length: ALLOWANCE }, (_, i) => ALLOWANCE - 1 - i), `X-RateLimit-Remaining counts down what this process may still admit (was ${r.before} from Redis)`)
  t.equal(r.allowance, ALLOWANCE, 'gateway_store_outage_admissions_total{kind="allowance"}')
  r.resume()
  t.ok(await poll(async () => await r.counted() === 1 + ALLOWANCE, 5_000), `written back into Redis once it answers: ${await r.counted()} counted (1 + ${ALLOWANCE})`)
})

t.test('strict: the same consumer is refused (no reserve, no allowance)', async (t) => {
  const r = await run(t, 'strict')
  r.resume()
  t.same(r.statuses, Array.from({ length: ALLOWANCE + 3 }, () => 503), 'every request 503 while Redis is frozen')
  t.equal(r.allowance, 0, 'nothing admitted from an allowance')
})
