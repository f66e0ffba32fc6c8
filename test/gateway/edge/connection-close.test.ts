// A client far over its limit is answered with `Connection: close`: refused by the limiter
// closeAfterRejections times in a row (anonymous clients are never banned, so this is their bound),
// or banned (at once). The attack it answers: one 429 per keep-alive connection, each left open, so
// the connections pile up; now only the first few refused ones stay open. Real sockets, an injected
// limiter clock (no sleeping) and a streak of test size.
import t, { type Test } from 'tap'
import { startGateway, type StartedGateway } from '../../helpers/gateway.js'
import { DEMO_KEYS, plansYaml, testConfig } from '../../helpers/config-fixture.js'
import { openKeptAlive, type KeptAlive } from '../../helpers/kept-alive.js'
import { until } from '../../helpers/poll.js'
import { sampleValue, scrape } from '../../helpers/scrape.js'

const ANONYMOUS_PER_MINUTE = 3
const CLOSE_AFTER = 5
const START = Date.parse('2030-01-10T12:00:00Z')

async function gateway (t: Test, clock: { now: number }): Promise<StartedGateway & { port: number }> {
  const plans = plansYaml({ anonymous: { perMinute: ANONYMOUS_PER_MINUTE, perDay: 1000 }, free: { perMinute: 1, perDay: 1000 }, ban: { threshold: 1 } })
  const gw = await startGateway(t, {
    config: testConfig({ 'plans.yaml': plans }),
    now: () => clock.now,
    serverLimits: { closeAfterRejections: CLOSE_AFTER }
  })
  return { ...gw, port: Number(new URL(gw.url).port) }
}

function tracked (t: Test, connections: KeptAlive[]): KeptAlive[] {
  t.teardown(() => { for (const c of connections) c.destroy() })
  return connections
}

t.test('on one keep-alive connection: the 429s after a streak of CLOSE_AFTER close it', async (t) => {
  const clock = { now: START }
  const gw = await gateway(t, clock)
  const [c] = tracked(t, [await openKeptAlive(gw, '127.0.30.1')])
  const seen: string[] = []
  for (let i = 0; i < ANONYMOUS_PER_MINUTE + CLOSE_AFTER; i++) {
    const res = await c!.send()
    seen.push(`${res.status}${res.headers.connection === 'close' ? ' close' : ''}`)
  }
  t.same(seen, ['401', '401', '401', '429', '429', '429', '429', '429 close'])
  await c!.whenClosed
  t.pass('the server closed the connection after that answer')
  t.equal(sampleValue((await scrape(gw.adminUrl)).samples, 'gateway_connections_closed_over_limit_total'), 1)
})

t.test('one 429 per connection, left open: only the first of the streak stay open', async (t) => {
  const clock = { now: START }
  const gw = await gateway(t, clock)
  const connections = tracked(t, [])
  const statuses: number[] = []
  for (let i = 0; i < 30; i++) {
    const c = await openKeptAlive(gw, '127.0.31.1')
    connections.push(c)
    statuses.push((await c.send()).status)
  }
  t.same(statuses.slice(0, 4), [401, 401, 401, 429])
  t.equal(statuses.filter((s) => s === 429).length, 30 - ANONYMOUS_PER_MINUTE)
  await until('the refused connections past the streak to close', () => connections.filter((c) => c.closed).length === 30 - ANONYMOUS_PER_MINUTE - (CLOSE_AFTER - 1))
  t.same(connections.filter((c) => !c.closed), connections.slice(0, ANONYMOUS_PER_MINUTE + CLOSE_AFTER - 1),
    'the admitted ones and the first CLOSE_AFTER − 1 refused ones are the only ones left open')

  const other = tracked(t, [await openKeptAlive(gw, '127.0.31.2')])[0]!
  const res = await other.send()
  t.equal(res.status, 401, 'another address is not affected')
  t.not(res.headers.connection, 'close')
})

t.test('an admitted request ends the streak', async (t) => {
  const clock = { now: START }
  const gw = await gateway(t, clock)
  const [c] = tracked(t, [await openKeptAlive(gw, '127.0.32.1')])
  for (let i = 0; i < ANONYMOUS_PER_MINUTE; i++) t.equal((await c!.send()).status, 401)
  for (let i = 0; i < CLOSE_AFTER - 1; i++) t.equal((await c!.send()).headers.connection, 'keep-alive')
  clock.now += 61_000
  t.equal((await c!.send()).status, 401, 'a minute later the window admits again')
  for (let i = 0; i < ANONYMOUS_PER_MINUTE - 1; i++) await c!.send()
  const refused = []
  for (let i = 0; i < CLOSE_AFTER - 1; i++) refused.push(await c!.send())
  t.same(refused.map((r) => `${r.status} ${r.headers.connection}`), Array(CLOSE_AFTER - 1).fill('429 keep-alive'), 'a new streak starts from zero')
  t.notOk(c!.closed)
})

t.test('a banned key\'s answer closes its connection at once', async (t) => {
  const clock = { now: START }
  const gw = await gateway(t, clock)
  const [c] = tracked(t, [await openKeptAlive(gw, '127.0.33.1')])
  const key = `GET /v1/pets HTTP/1.1\r\nhost: gateway\r\nauthorization: Bearer ${DEMO_KEYS.free}`
  t.equal((await c!.send(key)).status, 200)
  const limited = await c!.send(key)
  t.same([limited.status, limited.headers.connection], [429, 'keep-alive'], 'over the limit once: kept')
  const banned = await c!.send(key)
  t.same([banned.status, banned.headers.connection], [429, 'close'], 'the ban starts: closed')
  await c!.whenClosed
  const [again] = tracked(t, [await openKeptAlive(gw, '127.0.33.1')])
  const stillBanned = await again!.send(key)
  t.same([stillBanned.status, stillBanned.headers.connection], [429, 'close'], 'banned on a new connection: closed again')
})
