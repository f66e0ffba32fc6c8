import t from 'tap'
import { assertEmptyList, assertError, postJson, request, startBackend } from '../helpers/backend.js'
import type { Test } from 'tap'
import type { StartedBackend } from '../helpers/backend.js'

interface Pet { id: number, name: string, categoryId: number, status: string }

const STATUSES = ['available', 'pending', 'sold'] as const
const PET_COUNT = 23

async function seed (backend: StartedBackend): Promise<Pet[]> {
  const pets: Pet[] = []
  for (let i = 0; i < PET_COUNT; i++) {
    const res = await request(`${backend.url}/v1/pets`, postJson({ name: `pet ${i}`, categoryId: i + 1, status: STATUSES[i % 3] }))
    pets.push(res.body as Pet)
  }
  return pets
}

const NEXT_LINK = /^<(\/v1\/pets\?[^>]+)>; rel="next"$/

/** Follows Link rel="next" from `first` to the end, asserting every page's size and link. */
async function walk (t: Test, backend: StartedBackend, first: string, limit: number): Promise<Pet[]> {
  const seen: Pet[] = []
  let next: string | undefined = first
  let pages = 0
  while (next !== undefined) {
    const res = await request(`${backend.url}${next}`)
    t.equal(res.status, 200)
    const page = res.body as Pet[]
    t.ok(page.length <= limit, `page of ${page.length} ≤ ${limit}`)
    seen.push(...page)
    const link = res.headers.get('link')
    if (link === null) {
      next = undefined
    } else {
      t.equal(page.length, limit, 'a page announcing a next one is full')
      const match = NEXT_LINK.exec(link)
      t.ok(match, `Link header: ${link}`)
      next = match?.[1]
      const query = new URL(`http://x${next ?? ''}`).searchParams
      t.equal(query.get('limit'), String(limit))
      t.ok(query.get('cursor'))
    }
    if (++pages > 100) throw new Error('paging does not end')
  }
  return seen
}

t.test('GET /v1/pets on an empty store is an empty array without Link', async (t) => {
  const backend = await startBackend(t)
  await assertEmptyList(t, `${backend.url}/v1/pets`)
})

t.test('default limit is 20, ordered by id, with a Link to the rest', async (t) => {
  const backend = await startBackend(t)
  const pets = await seed(backend)
  const res = await request(`${backend.url}/v1/pets`)
  t.equal(res.status, 200)
  t.strictSame(res.body, pets.slice(0, 20))
  const cursor = Buffer.from('pets:20').toString('base64url')
  t.equal(res.headers.get('link'), `</v1/pets?cursor=${cursor}&limit=20>; rel="next"`)
  const rest = await request(`${backend.url}/v1/pets?cursor=${cursor}&limit=20`)
  t.strictSame(rest.body, pets.slice(20))
  t.equal(rest.headers.get('link'), null)
})

t.test('a page that ends exactly at the last pet has no Link', async (t) => {
  const backend = await startBackend(t)
  const pets = await seed(backend)
  const res = await request(`${backend.url}/v1/pets?limit=${PET_COUNT}`)
  t.strictSame(res.body, pets)
  t.equal(res.headers.get('link'), null)
})

t.test('paging through Link visits every pet once, in order, for several page sizes', async (t) => {
  const backend = await startBackend(t)
  const pets = await seed(backend)
  for (const limit of [1, 2, 5, 7, 22, 23, 100]) {
    const seen = await walk(t, backend, `/v1/pets?limit=${limit}`, limit)
    t.strictSame(seen, pets, `limit ${limit}: no repeats, no gaps`)
  }
})

t.test('paging with a status filter keeps the filter in the Link', async (t) => {
  const backend = await startBackend(t)
  const pets = await seed(backend)
  for (const status of STATUSES) {
    const expected = pets.filter((p) => p.status === status)
    for (const limit of [1, 3, 4, 8, 100]) {
      const seen = await walk(t, backend, `/v1/pets?status=${status}&limit=${limit}`, limit)
      t.strictSame(seen, expected, `${status}, limit ${limit}`)
    }
    const first = await request(`${backend.url}/v1/pets?status=${status}&limit=2`)
    const link = first.headers.get('link') ?? ''
    t.match(link, `&status=${status}>; rel="next"`)
  }
})

t.test('pets added while paging appear on later pages, none repeat', async (t) => {
  const backend = await startBackend(t)
  const pets = await seed(backend)
  const first = await request(`${backend.url}/v1/pets?limit=10`)
  const added = await request(`${backend.url}/v1/pets`, postJson({ name: 'late', categoryId: 1 }))
  const next = NEXT_LINK.exec(first.headers.get('link') ?? '')?.[1] ?? ''
  const rest = await walk(t, backend, next, 10)
  t.strictSame([...(first.body as Pet[]), ...rest], [...pets, added.body])
})

t.test('limit, status and cursor are validated: 400 invalid_parameter', async (t) => {
  const backend = await startBackend(t)
  await seed(backend)
  const cases: Array<[string, string]> = [
    ['limit=0', 'querystring/limit must be >= 1'],
    ['limit=101', 'querystring/limit must be <= 100'],
    ['limit=-1', 'querystring/limit must be >= 1'],
    ['limit=2.5', 'querystring/limit must be integer'],
    ['limit=ten', 'querystring/limit must be integer'],
    ['limit=', 'querystring/limit must be integer'],
    ['limit=1e400', 'querystring/limit must be a finite integer'],
    ['limit=Infinity', 'querystring/limit must be a finite integer'],
    ['status=lost', 'querystring/status must be equal to one of the allowed values'],
    ['status=', 'querystring/status must be equal to one of the allowed values'],
    ['cursor=', 'querystring/cursor must NOT have fewer than 1 characters'],
    [`cursor=${'A'.repeat(101)}`, 'querystring/cursor must NOT have more than 100 characters']
  ]
  for (const [query, message] of cases) {
    assertError(t, await request(`${backend.url}/v1/pets?${query}`), 400, 'invalid_parameter', message)
  }
})

t.test('a cursor that is not exactly one this list issued is 400 invalid_parameter', async (t) => {
  const backend = await startBackend(t)
  await seed(backend)
  const b64 = (text: string): string => Buffer.from(text).toString('base64url')
  const bad = [
    'not a cursor', '!!!!', 'cGV0czox=', 'cGV0czoy.', 'cGV0czoxx', b64('pets:'), b64('pets:0'), b64('pets:01'), b64('pets:-1'),
    b64('pets:1.5'), b64('pets:9007199254740992'), b64('pets:99999999999999999'), b64('orders:1'), b64('pets:1 '),
    b64('{"id":1}'), b64('\u0000')
  ]
  for (const cursor of bad) {
    const res = await request(`${backend.url}/v1/pets?cursor=${encodeURIComponent(cursor)}`)
    assertError(t, res, 400, 'invalid_parameter', 'querystring/cursor is not a valid cursor')
  }
  const largest = await request(`${backend.url}/v1/pets?cursor=${b64('pets:9007199254740991')}`)
  t.equal(largest.status, 200)
  t.strictSame(largest.body, [])
})

t.test('duplicate query parameters are 400 invalid_parameter, not a crash', async (t) => {
  const backend = await startBackend(t)
  const c = Buffer.from('pets:1').toString('base64url')
  assertError(t, await request(`${backend.url}/v1/pets?limit=1&limit=2`), 400, 'invalid_parameter', 'querystring/limit must be integer')
  assertError(t, await request(`${backend.url}/v1/pets?status=sold&status=sold`), 400, 'invalid_parameter', 'querystring/status must be string')
  assertError(t, await request(`${backend.url}/v1/pets?cursor=${c}&cursor=${c}`), 400, 'invalid_parameter', 'querystring/cursor must be string')
})
