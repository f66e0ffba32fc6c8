// The client and monthly quotas, against the real stack on an injected clock: a used-up quota
// (quota_exceeded) is handed back at once, never waited out or retried; past a soft quota the
// client reports X-Quota-Overage as rateLimit.overage.
import t, { type Test } from 'tap'
import { createPetStoreClient, PetStoreError, type PetStoreClientOptions } from '../../src/client/index.js'
import { startGateway } from '../helpers/gateway.js'
import { DEMO_KEYS, testConfig } from '../helpers/config-fixture.js'
import { METERED_PLANS } from '../helpers/quota.js'

interface Stack {
  clock: { now: number }
  sleeps: number[]
  options: (key: string) => PetStoreClientOptions
}

async function stack (t: Test): Promise<Stack> {
  const clock = { now: Date.UTC(2030, 2, 10, 12) }
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': METERED_PLANS }), now: () => clock.now })
  const sleeps: number[] = []
  const options = (key: string): PetStoreClientOptions => ({
    baseUrl: `${gw.url}/v1`,
    apiKey: key,
    sleep: async (ms) => { sleeps.push(ms); clock.now += ms },
    onDeprecation: () => {}
  })
  return { clock, sleeps, options }
}

t.test('a used-up monthly quota is handed back at once (quota_exceeded, no retry); past a soft quota the client reports the overage', async (t) => {
  const s = await stack(t)
  // pro: 10 a minute, a day and a month.
  const pro = createPetStoreClient(s.options(DEMO_KEYS.pro))
  for (let i = 0; i < 10; i++) await pro.listPets({ limit: 1 })
  t.match(pro.rateLimit, { limit: 10, remaining: 0, policy: /"month";q=10;w=2678400$/, overage: undefined })
  const err = await pro.listPets({ limit: 1 }).catch((e: unknown) => e) as PetStoreError
  t.ok(err instanceof PetStoreError)
  t.match(err, { status: 429, code: 'quota_exceeded', info: { attempts: 1 } }, 'no retry: waiting would take until next month (or the day\'s end)')
  t.ok((err.retryAfter ?? 0) > 3600, `Retry-After ${err.retryAfter ?? '?'} s`)
  t.same(s.sleeps, [], 'nothing slept')

  // business: 20 a month, overage allowed; 10 a minute and 20 a day. Two days fill the month, the third goes past it.
  const business = createPetStoreClient(s.options(DEMO_KEYS.business))
  for (const day of [0, 1]) {
    s.clock.now = Date.UTC(2030, 2, 11 + 2 * day, 12) // two days apart: the rolling day has let go
    for (let i = 0; i < 10; i++) await business.listPets({ limit: 1 })
    s.clock.now += 61_000
    for (let i = 0; i < 10; i++) await business.listPets({ limit: 1 })
    if (day === 0) t.equal(business.rateLimit?.overage, undefined, 'within the quota: no overage')
  }
  t.equal(business.rateLimit?.overage, 20, 'the second day\'s 20 are past the month\'s 20')
  const { info } = await business.listPets({ limit: 1 }).catch((e: unknown) => e as PetStoreError)
  t.equal(info.status, 429, 'the day is full: the minute and day windows still block')
})
