// Sentinel: the gateway finds the master through a real Sentinel, counts there, and readiness names
// the store (kind sentinel, the Sentinel's address) and really contacts it: with the master gone,
// STORE_ON_ERROR=local keeps the gateway ready but says `fallback`.
import t from 'tap'
import { startGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS } from '../../helpers/config-fixture.js'
import { startRedis, startRedisSentinel } from '../../helpers/redis.js'
import { FIELD } from '../../../src/gateway/limiter/redis/layout.js'

interface Ready { checks: Record<string, Record<string, unknown>> }

t.test('Sentinel: the gateway finds the master through a real Sentinel and counts there', async (t) => {
  const master = await startRedis(t)
  const sentinel = await startRedisSentinel(t, master)
  const gw = await startGateway(t, {
    limiter: { settings: { redisSentinels: [`127.0.0.1:${sentinel.port}`], redisSentinelName: sentinel.masterName } }
  })
  t.equal(gw.app.limiter.store.describe().kind, 'sentinel')

  const remaining: string[] = []
  for (let i = 0; i < 3; i++) {
    const res = await fetch(`${gw.url}/v1/store/orders`, { headers: bearer(DEMO_KEYS.pro) })
    t.equal(res.status, 200)
    remaining.push(res.headers.get('x-ratelimit-remaining') ?? '')
    await res.arrayBuffer()
  }
  t.same(remaining, ['299', '298', '297'], 'Remaining counts down by one')
  // Three requests, plus the block a process busy at 2 a second or more may hold (still counted).
  const counted = Number(await master.cli('HGET', 'rl:{demo-pro}', FIELD.minuteUnits))
  t.ok(counted >= 3 && counted <= 6, `the windows live on the master Sentinel named (${counted} counted)`)
  const ready = await fetch(`${gw.adminUrl}/readyz`)
  t.equal(ready.status, 200)
  t.same((await ready.json() as Ready).checks.store, { ok: true, kind: 'sentinel', nodes: [`127.0.0.1:${sentinel.port}`], state: 'ok' })

  await master.stop()
  const down = await fetch(`${gw.adminUrl}/readyz`)
  t.equal(down.status, 200, 'STORE_ON_ERROR=local: still ready while the master is gone')
  t.match((await down.json() as Ready).checks.store, { ok: true, kind: 'sentinel', state: 'fallback' }, 'but says it answers from the fallback')
})
