// A URL the router refuses is answered in the Error shape without echoing the path (issue 39 row
// 7): an admin id of 5,000 characters got Fastify's own 414 body (`FST_ERR_MAX_PARAM_LENGTH`) with
// the whole path in its message, and a 404 repeated a path of any length whole. Checked on the
// admin app and on the public listener.
import t from 'tap'
import { ECHOED_PATH_MAX } from '../../../src/interface/errors.js'
import { startGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS } from '../../helpers/config-fixture.js'

const LONG_ID = 'a'.repeat(5_000)
const ERROR_SHAPE_KEYS = ['code', 'message', 'status']

interface Answer { status: number, body: Record<string, unknown>, text: string }

async function get (url: string, init: RequestInit = {}): Promise<Answer> {
  const res = await fetch(url, init)
  const text = await res.text()
  return { status: res.status, body: JSON.parse(text) as Record<string, unknown>, text }
}

t.test('admin: a 5,000-character id is 400 invalid_parameter in the Error shape, the path not echoed', async (t) => {
  const gw = await startGateway(t)
  const paths = [`/admin/keys/${LONG_ID}/usage`, `/admin/consumers/${LONG_ID}`]
  for (const path of paths) {
    const answer = await get(gw.adminUrl + path)
    t.equal(answer.status, 400, path.slice(0, 30))
    t.same(Object.keys(answer.body).sort(), ERROR_SHAPE_KEYS, 'the Error shape, nothing else')
    t.same(answer.body, { code: 'invalid_parameter', message: 'A path parameter is longer than the limit', status: 400 })
    t.notOk(answer.text.includes('aaaaaaaaaa'), 'no part of the id is echoed')
  }
  const reset = await get(`${gw.adminUrl}/admin/consumers/${LONG_ID}/reset`, { method: 'POST', headers: { 'content-type': 'application/json' } })
  t.equal(reset.status, 400, 'a state-changing route too')
  t.equal(reset.body.code, 'invalid_parameter')
  const badEncoding = await get(`${gw.adminUrl}/admin/consumers/%zz`)
  t.same(badEncoding.body, { code: 'invalid_parameter', message: 'The URL is not valid', status: 400 }, 'bad percent-encoding too')
})

t.test('a 404 repeats at most the first ECHOED_PATH_MAX characters of a long path, on both listeners', async (t) => {
  const gw = await startGateway(t)
  for (const [what, url, headers] of [
    ['admin', `${gw.adminUrl}/admin/${LONG_ID}`, {}],
    ['public', `${gw.url}/v1/store/orders/${LONG_ID}`, bearer(DEMO_KEYS.pro)]
  ] as const) {
    const answer = await get(url, { headers })
    t.equal(answer.status, 404, what)
    t.same(Object.keys(answer.body).sort(), ERROR_SHAPE_KEYS, `${what}: the Error shape`)
    t.equal(answer.body.code, 'route_not_found')
    t.ok(answer.text.length < ECHOED_PATH_MAX + 200, `${what}: a short answer (${answer.text.length} bytes)`)
    t.match(answer.body.message, /… \(\d+ characters\)$/, `${what}: the message says the path was cut`)
  }
  const short = await get(`${gw.adminUrl}/admin/nothing-here`)
  t.equal(short.body.message, 'No route GET /admin/nothing-here', 'a short path is repeated whole')
})

t.test('public: a 5,000-character pet id is 400 invalid_parameter, the path not echoed', async (t) => {
  const gw = await startGateway(t)
  for (const headers of [bearer(DEMO_KEYS.pro), {}]) {
    const answer = await get(`${gw.url}/v1/pets/${LONG_ID}`, { headers })
    t.equal(answer.status, 400)
    t.same(answer.body, { code: 'invalid_parameter', message: 'A path parameter is longer than the limit', status: 400 })
  }
})
