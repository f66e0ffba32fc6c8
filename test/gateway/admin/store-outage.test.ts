// Admin reads while the real redis-server is frozen (SIGSTOP: connections open, no answers): every
// read of the limiter's state that Redis must answer is `503 unavailable` in the Error shape, never a
// `500` (issue 33, row 5: `GET /admin/bans` was a 500 while the other reads were 503), and the
// history's reads say it was the usage history that did not answer, not the limiter store.
import t from 'tap'
import { startGateway } from '../../helpers/gateway.js'
import { ADMIN_JSON } from '../../helpers/config-fixture.js'
import { startRedis } from '../../helpers/redis.js'

const LIMITER_DOWN = { code: 'unavailable', message: 'The limiter store did not answer; try again', status: 503 }
const HISTORY_DOWN = { code: 'unavailable', message: 'The usage history store did not answer; try again', status: 503 }

t.test('Redis frozen: GET /admin/bans, DELETE /admin/bans/:id and the consumer reads answer 503 unavailable, not 500', async (t) => {
  const redis = await startRedis(t)
  const gw = await startGateway(t, { limiter: { settings: { redisUrl: redis.url } }, history: { flushMs: 3_600_000, waitMs: 300 } })
  t.equal((await fetch(`${gw.adminUrl}/admin/bans`)).status, 200, 'answered while Redis runs')

  redis.signal('SIGSTOP')
  t.teardown(() => { redis.signal('SIGCONT') })
  const cases: Array<[string, string, typeof LIMITER_DOWN]> = [
    ['GET', '/admin/bans', LIMITER_DOWN],
    ['DELETE', '/admin/bans/demo-free', LIMITER_DOWN],
    ['GET', '/admin/consumers/demo-free', LIMITER_DOWN],
    ['GET', '/admin/consumers/demo-free/usage', HISTORY_DOWN],
    ['GET', '/admin/plans/free/shadow', HISTORY_DOWN]
  ]
  for (const [method, path, body] of cases) {
    const started = Date.now()
    const res = await fetch(`${gw.adminUrl}${path}`, { method, headers: method === 'GET' ? {} : ADMIN_JSON })
    const ms = Date.now() - started
    t.equal(res.status, 503, `${method} ${path}: 503 (${ms} ms)`)
    t.equal(res.headers.get('content-type'), 'application/json; charset=utf-8')
    t.same(await res.json(), body, `${method} ${path}: the Error shape, naming the store that did not answer`)
    t.ok(ms < 5_000, `${method} ${path} answered in ${ms} ms`)
  }
  t.notOk(gw.logs.some((line) => line.msg === 'request failed'), 'nothing logged as an unexpected error')
})
