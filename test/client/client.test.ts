// The client against the real stack (gateway + backend over HTTP). The limiter runs on a virtual
// clock that the client's injected sleep advances, so "wait Retry-After" is real to the gateway
// without the test waiting a minute; every response the client receives is recorded.
import t, { type Test } from 'tap'
import { createPetStoreClient, PetStoreError, type DeprecationWarningInfo, type PetStoreClientOptions, type RateLimitInfo } from '../../src/client/index.js'
import { startGateway, type StartedGateway } from '../helpers/gateway.js'
import { bearer, DEMO_KEYS, testConfig } from '../helpers/config-fixture.js'

interface Seen { status: number, code: string | undefined, retryAfter: number | undefined }

interface Stack {
  gw: StartedGateway
  clock: { now: number }
  seen: Seen[]
  sleeps: number[]
  options: (key: string, extra?: Partial<PetStoreClientOptions>) => PetStoreClientOptions
}

async function stack (t: Test, config = testConfig()): Promise<Stack> {
  const clock = { now: Date.now() }
  const gw = await startGateway(t, { config, now: () => clock.now })
  const seen: Seen[] = []
  const sleeps: number[] = []
  const recordingFetch = async (request: Request): Promise<Response> => {
    const res = await fetch(request)
    let code: string | undefined
    if (res.status >= 400) code = (await res.clone().json() as { code: string }).code
    const retryAfter = res.headers.get('retry-after')
    seen.push({ status: res.status, code, retryAfter: retryAfter === null ? undefined : Number(retryAfter) })
    return res
  }
  const options = (key: string, extra: Partial<PetStoreClientOptions> = {}): PetStoreClientOptions => ({
    baseUrl: `${gw.url}/v1`,
    apiKey: key,
    fetch: recordingFetch,
    sleep: async (ms) => { sleeps.push(ms); clock.now += ms },
    onDeprecation: () => {},
    ...extra
  })
  return { gw, clock, seen, sleeps, options }
}

t.test('a loop far over a free key\'s limit completes, waits out every 429 and is never banned', async (t) => {
  const s = await stack(t)
  const client = createPetStoreClient(s.options(DEMO_KEYS.free))
  const CALLS = 200 // 60/min on the free plan; the ban threshold is 30 429s within 60 s
  for (let i = 0; i < CALLS; i++) {
    const page = await client.listPets({ limit: 1 })
    t.equal(page.info.status, 200)
  }
  const limited = s.seen.filter((r) => r.status === 429)
  t.equal(s.seen.filter((r) => r.status === 200).length, CALLS, 'every call succeeded')
  t.same(s.seen.filter((r) => r.code === 'key_banned'), [], 'never banned')
  t.ok(limited.length >= 3, `over the limit several times (${limited.length} 429s)`)
  t.ok(limited.length <= 10, 'one 429 per wait, not a retry storm')
  t.ok(limited.every((r) => r.code === 'rate_limited'))
  // Each 429 was followed by a sleep of at least its Retry-After.
  t.equal(s.sleeps.length, limited.length)
  limited.forEach((r, i) => t.ok((s.sleeps[i] ?? 0) >= (r.retryAfter ?? Infinity) * 1000, `wait ${s.sleeps[i]} ms ≥ Retry-After ${r.retryAfter} s`))
})

t.test('control: the same loop without waiting is banned, so the test above could have failed', async (t) => {
  const s = await stack(t)
  const codes: string[] = []
  for (let i = 0; i < 200; i++) {
    const res = await fetch(`${s.gw.url}/v1/pets?limit=1`, { headers: bearer(DEMO_KEYS.free) })
    const body = await res.json() as { code?: string }
    if (res.status === 429 && body.code !== undefined) codes.push(body.code)
  }
  t.ok(codes.includes('key_banned'))
})

t.test('a banned key is never retried before its Retry-After', async (t) => {
  const s = await stack(t)
  for (let i = 0; i < 100; i++) await (await fetch(`${s.gw.url}/v1/pets`, { headers: bearer(DEMO_KEYS.free) })).arrayBuffer()

  const impatient = createPetStoreClient(s.options(DEMO_KEYS.free, { maxWaitMs: 60_000 }))
  const err = await impatient.listPets().catch((e: unknown) => e)
  t.type(err, PetStoreError)
  const banned = err as PetStoreError
  t.equal(banned.status, 429)
  t.equal(banned.code, 'key_banned')
  t.ok((banned.retryAfter ?? 0) > 60, `ban of ${banned.retryAfter} s is longer than the client will wait`)
  t.equal(banned.info.attempts, 1, 'returned at once, not retried')
  t.same(s.sleeps, [])

  s.seen.length = 0
  const patient = createPetStoreClient(s.options(DEMO_KEYS.free, { maxWaitMs: 3_600_000 }))
  const page = await patient.listPets()
  t.equal(page.info.status, 200)
  t.equal(page.info.attempts, 2)
  t.same(s.seen.map((r) => r.code ?? r.status), ['key_banned', 200])
  t.equal(s.sleeps.length, 1)
  t.equal(s.sleeps[0], (s.seen[0]?.retryAfter ?? 0) * 1000, 'waited exactly the ban, no earlier retry')
})

t.test('rate-limit headers are surfaced on every call', async (t) => {
  const s = await stack(t)
  const reported: RateLimitInfo[] = []
  const client = createPetStoreClient(s.options(DEMO_KEYS.free, { onRateLimit: (info) => reported.push(info) }))
  const first = await client.listPets()
  const now = Math.floor(s.clock.now / 1000)
  t.match(first.info.rateLimit, { limit: 60, remaining: 59, policy: '"minute";q=60;w=60, "day";q=1000;w=86400' })
  t.ok((first.info.rateLimit?.reset ?? 0) >= now + 59 && (first.info.rateLimit?.reset ?? 0) <= now + 61)
  const second = await client.listOrders()
  t.equal(second.info.rateLimit?.remaining, 58)
  t.equal(second.info.lifecycle.stability, 'experimental')
  t.same(client.rateLimit, second.info.rateLimit)
  t.same(reported.map((r) => r.remaining), [59, 58])
  t.match(first.info.requestId, /^[0-9a-f-]{36}$/)
})

t.test('a deprecated operation warns once, with its sunset and successor; the data still comes back', async (t) => {
  const s = await stack(t)
  const warnings: DeprecationWarningInfo[] = []
  const client = createPetStoreClient(s.options(DEMO_KEYS.pro, { onDeprecation: (w) => warnings.push(w) }))
  const created = await client.createPet({ name: 'Rex', categoryId: 3 })
  t.same(created.data, { id: 1, name: 'Rex', categoryId: 3, status: 'available' })
  t.equal(created.info.status, 201)
  for (let i = 0; i < 3; i++) {
    const pet = await client.getPet(1)
    t.same(pet.data, created.data)
    t.same(pet.info.lifecycle, {
      deprecatedSince: new Date(Date.UTC(2026, 10, 21)),
      sunset: new Date(Date.UTC(2030, 11, 5)),
      successor: '/v1/pets',
      stability: undefined
    })
  }
  await client.listPets()
  t.equal(warnings.length, 1)
  t.equal(warnings[0]?.operationId, 'getPet')
  t.equal(warnings[0]?.message, 'Pet Store operation getPet is deprecated; it will be removed on Thu, 05 Dec 2030 00:00:00 GMT; use /v1/pets instead')
})

t.test('by default the warning is a process DeprecationWarning', async (t) => {
  const s = await stack(t)
  const { onDeprecation: _, ...options } = s.options(DEMO_KEYS.pro)
  const client = createPetStoreClient(options)
  const warned = new Promise<Error>((resolve) => process.once('warning', resolve))
  await t.rejects(client.getPet(5), { name: 'PetStoreError', status: 404, code: 'not_found', message: 'Pet 5 not found' })
  const warning = await warned as Error & { code?: string }
  t.equal(warning.name, 'DeprecationWarning')
  t.equal(warning.code, 'PETSTORE_DEPRECATED_OPERATION')
})

t.test('allPets follows Link rel="next" over every page', async (t) => {
  const s = await stack(t)
  const client = createPetStoreClient(s.options(DEMO_KEYS.business))
  for (let i = 1; i <= 45; i++) await client.createPet({ name: `Pet ${i}`, categoryId: 1, status: i % 3 === 0 ? 'sold' : 'available' })
  s.seen.length = 0
  const names: string[] = []
  for await (const pet of client.allPets({ limit: 20 })) names.push(pet.name)
  t.same(names, Array.from({ length: 45 }, (_, i) => `Pet ${i + 1}`))
  t.equal(s.seen.length, 3, 'three pages')
  const sold: number[] = []
  for await (const pet of client.allPets({ limit: 4, status: 'sold' })) sold.push(pet.id)
  t.same(sold, Array.from({ length: 15 }, (_, i) => (i + 1) * 3), 'the filter is kept across pages')
})

t.test('a next link that leaves the list (rewritten by something between) is refused, not followed', async (t) => {
  const s = await stack(t)
  const rewriting = async (request: Request): Promise<Response> => {
    const res = await fetch(request)
    const headers = new Headers(res.headers)
    headers.set('link', '</v1/store/orders?offset=10>; rel="next"')
    return new Response(await res.arrayBuffer(), { status: res.status, headers })
  }
  const client = createPetStoreClient(s.options(DEMO_KEYS.business, { fetch: rewriting }))
  await t.rejects(client.listPets({ limit: 1 }), { message: 'Link rel="next" leaves the list: /v1/store/orders?offset=10' })
})

t.test('a 429 whose body is not the Error shape (a proxy in front) is waited out like a rate limit', async (t) => {
  const s = await stack(t)
  let sent = 0
  const proxyFirst = async (request: Request): Promise<Response> => {
    sent++
    if (sent === 1) return new Response('<html>429 Too Many Requests</html>', { status: 429, headers: { 'content-type': 'text/html', 'retry-after': '2' } })
    return await fetch(request)
  }
  const client = createPetStoreClient(s.options(DEMO_KEYS.business, { fetch: proxyFirst, random: () => 0 }))
  const page = await client.listPets({ limit: 1 })
  t.ok(Array.isArray(page.data), 'the retry is answered')
  t.equal(sent, 2, 'sent again once')
  t.same(s.sleeps, [2000], 'after its Retry-After (no backoff drawn with random() = 0)')
})

t.test('errors carry the Error body; a bad key is 401', async (t) => {
  const s = await stack(t)
  const client = createPetStoreClient(s.options(DEMO_KEYS.pro))
  await t.rejects(client.createPet({ name: '', categoryId: 1 }), { status: 400, code: 'invalid_body' })
  const anonymous = createPetStoreClient(s.options('not-a-key'))
  const err = await anonymous.listPets().catch((e: unknown) => e) as PetStoreError
  t.equal(err.status, 401)
  t.equal(err.code, 'unauthorized')
  t.equal(err.info.rateLimit?.limit, 30, 'the anonymous policy\'s headers')
})

t.test('backoff: Retry-After plus exponential, fully jittered, bounded steps; then the 429 is returned', async (t) => {
  let calls = 0
  const sleeps: number[] = []
  const tooMany = (): Response => new Response(JSON.stringify({ code: 'rate_limited', message: 'slow down', status: 429 }),
    { status: 429, headers: { 'content-type': 'application/json', 'retry-after': '2' } })
  const client = createPetStoreClient({
    baseUrl: 'http://127.0.0.1:9/v1',
    apiKey: 'k',
    maxRetries: 6,
    baseDelayMs: 100,
    maxBackoffMs: 1000,
    random: () => 0.5,
    sleep: async (ms) => { sleeps.push(ms) },
    fetch: async () => { calls++; return tooMany() }
  })
  const err = await client.listPets().catch((e: unknown) => e) as PetStoreError
  t.equal(err.code, 'rate_limited')
  t.equal(err.retryAfter, 2)
  t.equal(calls, 7)
  t.equal(err.info.attempts, 7)
  t.same(sleeps, [2050, 2100, 2200, 2400, 2500, 2500])

  const capped = createPetStoreClient({
    baseUrl: 'http://127.0.0.1:9/v1', apiKey: 'k', maxWaitMs: 1000, sleep: async (ms) => { sleeps.push(ms) }, fetch: async () => tooMany()
  })
  const early = await capped.listPets().catch((e: unknown) => e) as PetStoreError
  t.equal(early.info.attempts, 1, 'a Retry-After beyond maxWaitMs is returned, not waited')
})

t.test('the client warns once when its key has less than 7 days left, and reports the expiry on every call', async (t) => {
  const key = 'psk_client_expiring_key_0123456789abc'
  const expiresAt = Date.UTC(2031, 5, 1)
  const { createHash } = await import('node:crypto')
  const config = testConfig({ 'keys.yaml': `keys:\n  - { id: expiring, sha256: ${createHash('sha256').update(key).digest('hex')}, plan: pro, expiresAt: 2031-06-01 }\n` })
  let gatewayNow = expiresAt - 10 * 86_400_000
  const gw = await startGateway(t, { config, now: () => gatewayNow })
  let clientNow = gatewayNow
  const warnings: string[] = []
  const client = createPetStoreClient({ baseUrl: `${gw.url}/v1`, apiKey: key, now: () => clientNow, onKeyExpiry: (w) => warnings.push(w.message), onDeprecation: () => {} })

  const early = await client.listPets()
  t.same(early.info.keyExpiresAt, new Date(expiresAt))
  t.same(warnings, [], '10 days left: no warning')

  clientNow = gatewayNow = expiresAt - 6.5 * 86_400_000
  await client.listPets()
  await client.listOrders()
  t.same(warnings, ['Pet Store API key expires on Sun, 01 Jun 2031 00:00:00 GMT (in 6.5 days); after that every request is refused with 401 key_expired: rotate it now'], 'warned once')

  gatewayNow = expiresAt
  const expired = await client.listPets().catch((err: unknown) => err)
  t.ok(expired instanceof PetStoreError)
  t.match(expired, { status: 401, code: 'key_expired', message: 'API key expired at 2031-06-01T00:00:00.000Z' })
  t.equal(warnings.length, 1)
})
