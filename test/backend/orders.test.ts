import t from 'tap'
import { openStore } from '../../src/backend/store.js'
import { assertEmptyList, assertError, postJson, request, startBackend } from '../helpers/backend.js'

interface Order { id: number, petId: number, quantity: number, status: string }

const ORDER_STATUSES = ['placed', 'approved', 'delivered'] as const

t.test('GET /v1/store/orders is an empty array in a fresh store', async (t) => {
  const backend = await startBackend(t)
  await assertEmptyList(t, `${backend.url}/v1/store/orders`)
})

t.test('orders are listed by id and paged through Link', async (t) => {
  const backend = await startBackend(t)
  await request(`${backend.url}/v1/pets`, postJson({ name: 'Rex', categoryId: 1 }))
  const seeder = openStore(backend.dbPath)
  t.teardown(() => seeder.close())
  const orders: Order[] = []
  for (let i = 0; i < 11; i++) {
    orders.push(seeder.createOrder({ petId: 1, quantity: i + 1, status: ORDER_STATUSES[i % 3] ?? 'placed' }))
  }
  t.strictSame(orders[0], { id: 1, petId: 1, quantity: 1, status: 'placed' })

  const all = await request(`${backend.url}/v1/store/orders`)
  t.strictSame(all.body, orders)
  t.equal(all.headers.get('link'), null)

  for (const limit of [1, 3, 4, 10, 11]) {
    const seen: Order[] = []
    let next: string | undefined = `/v1/store/orders?limit=${limit}`
    while (next !== undefined) {
      const res = await request(`${backend.url}${next}`)
      t.equal(res.status, 200)
      const page = res.body as Order[]
      seen.push(...page)
      const link = res.headers.get('link')
      if (link === null) break
      t.equal(page.length, limit)
      const last = page[page.length - 1] as Order
      const cursor = Buffer.from(`orders:${last.id}`).toString('base64url')
      t.equal(link, `</v1/store/orders?cursor=${cursor}&limit=${limit}>; rel="next"`)
      next = `/v1/store/orders?cursor=${cursor}&limit=${limit}`
    }
    t.strictSame(seen, orders, `limit ${limit}: no repeats, no gaps`)
  }
})

t.test('orders validate limit and cursor like pets do', async (t) => {
  const backend = await startBackend(t)
  const url = `${backend.url}/v1/store/orders`
  assertError(t, await request(`${url}?limit=0`), 400, 'invalid_parameter', 'querystring/limit must be >= 1')
  assertError(t, await request(`${url}?limit=101`), 400, 'invalid_parameter', 'querystring/limit must be <= 100')
  assertError(t, await request(`${url}?limit=1&limit=1`), 400, 'invalid_parameter', 'querystring/limit must be integer')
  assertError(t, await request(`${url}?cursor=xyz`), 400, 'invalid_parameter', 'querystring/cursor is not a valid cursor')
  const petCursor = Buffer.from('pets:1').toString('base64url')
  assertError(t, await request(`${url}?cursor=${petCursor}`), 400, 'invalid_parameter', 'querystring/cursor is not a valid cursor')
})

t.test('no public endpoint creates orders', async (t) => {
  const backend = await startBackend(t)
  const res = await request(`${backend.url}/v1/store/orders`, postJson({ petId: 1, quantity: 1 }))
  assertError(t, res, 405, 'method_not_allowed', 'Method POST is not allowed on /v1/store/orders')
  t.equal(res.headers.get('allow'), 'GET, HEAD')
})
