// One client cannot lock everyone out with idle connections. The attack: thousands of keep-alive
// connections from one address, each sent one request and left open, spent the listener's whole
// connection budget, and every new client was reset until the keep-alive timeout. Here, on real
// sockets from distinct loopback (and IPv6) source addresses and with caps shrunk to test size:
// a client over its cap gives up its own oldest idle connection; a full listener closes its oldest
// idle connection for a newcomer and refuses only when nothing is idle; IPv6 counts per prefix; a
// trusted proxy's peer is exempt, and X-Forwarded-For never decides whose socket it is.
import t, { type Test } from 'tap'
import { buildGateway, type GatewayOptions } from '../../../src/gateway/app.js'
import type { ServerLimits } from '../../../src/gateway/edge/limits.js'
import { startBackend } from '../../helpers/backend.js'
import { startGateway, type StartedGateway } from '../../helpers/gateway.js'
import { DEMO_KEYS, testConfig } from '../../helpers/config-fixture.js'
import { openAnswered, openKeptAlive, type KeptAlive } from '../../helpers/kept-alive.js'
import { until } from '../../helpers/poll.js'
import { sampleValue, scrape } from '../../helpers/scrape.js'
import { setUpIpv6Loopback } from '../../helpers/ipv6-loopback.js'

/** Caps of test size; the streak that closes connections is out of the way (connection-close.test.ts covers it). */
function limits (maxConnections: number, maxConnectionsPerClient: number): Partial<ServerLimits> {
  return { maxConnections, maxConnectionsPerClient, closeAfterRejections: 1_000_000 }
}

async function gatewayWith (t: Test, serverLimits: Partial<ServerLimits>, extra: Partial<GatewayOptions> = {}): Promise<StartedGateway & { port: number }> {
  const gw = await startGateway(t, { serverLimits, ...extra })
  return { ...gw, port: Number(new URL(gw.url).port) }
}

/** A keyed request whose body never arrives: in progress (busy) until the connection goes. */
const BODY_PENDING = `POST /v1/pets HTTP/1.1\r\nhost: gateway\r\nauthorization: Bearer ${DEMO_KEYS.pro}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{`

function stillOpen (connections: readonly KeptAlive[]): KeptAlive[] {
  return connections.filter((c) => !c.closed)
}

/** Closed by the server unanswered, well before any request timeout could have closed it. */
async function closedOnAccept (t: Test, c: KeptAlive, what: string): Promise<void> {
  await until(what, () => c.closed, 3_000)
  t.equal(c.socket.bytesRead, 0, `${what}: no byte was answered`)
}

function destroyAll (t: Test, ...groups: KeptAlive[][]): void {
  t.teardown(() => { for (const group of groups) for (const c of group) c.destroy() })
}

t.test('one address holding idle keep-alive connections cannot take the listener\'s budget', async (t) => {
  const gw = await gatewayWith(t, limits(200, 50))
  const attacker = await openAnswered(gw, '127.0.10.1', 200)
  destroyAll(t, attacker)
  t.equal(attacker.length, 200, 'every connection was answered (each newcomer displaced the client\'s own oldest idle one)')
  await until('the displaced connections to close', () => stillOpen(attacker).length === 50)
  t.same(stillOpen(attacker), attacker.slice(150), 'the client keeps its 50 most recent connections')
  t.equal(gw.app.connections.open, 50)

  const newcomer = await openKeptAlive(gw, '127.0.20.1')
  destroyAll(t, [newcomer])
  t.equal((await newcomer.send()).status, 401, 'a new client is answered')
  const { samples } = await scrape(gw.adminUrl)
  t.equal(sampleValue(samples, 'gateway_connections_reclaimed_total', { reason: 'client_cap' }), 150)
  t.equal(sampleValue(samples, 'gateway_connections_refused_total', { reason: 'server_cap' }), 0)
  t.equal(sampleValue(samples, 'gateway_connections_open'), 51)
})

t.test('a full listener closes its oldest idle connection for a newcomer, and refuses only when none is idle', async (t) => {
  const gw = await gatewayWith(t, limits(30, 10))
  const held = [await openAnswered(gw, '127.0.11.1', 10), await openAnswered(gw, '127.0.11.2', 10), await openAnswered(gw, '127.0.11.3', 10)]
  destroyAll(t, ...held)
  const all = held.flat()
  t.equal(stillOpen(all).length, 30, 'the listener is full')

  const newcomer = await openKeptAlive(gw, '127.0.21.1')
  destroyAll(t, [newcomer])
  t.equal((await newcomer.send()).status, 401, 'the newcomer is answered')
  await until('the oldest idle connection to close', () => all[0]!.closed)
  t.same(all.filter((c) => c.closed), [all[0]], 'exactly one connection gave way: the oldest idle one')

  // Every connection busy: a request whose body has not arrived is in progress until it does.
  for (const c of [...stillOpen(all), newcomer]) c.write(BODY_PENDING)
  await until('every connection to be busy', () => gw.app.drain.inFlight === 30)
  const refused = await openKeptAlive(gw, '127.0.21.2')
  await closedOnAccept(t, refused, 'with nothing idle, the new connection is closed on accept')
  t.equal(stillOpen(all).length, 29, 'and no busy connection was cut for it')
  const { samples } = await scrape(gw.adminUrl)
  t.equal(sampleValue(samples, 'gateway_connections_reclaimed_total', { reason: 'server_cap' }), 1)
  t.equal(sampleValue(samples, 'gateway_connections_refused_total', { reason: 'server_cap' }), 1)
  for (const c of [...all, newcomer]) c.destroy() // before the gateway closes: it would wait for their bodies
})

t.test('a client whose connections are all busy is refused a new one; other clients are not', async (t) => {
  const gw = await gatewayWith(t, limits(100, 5))
  const busy = await openAnswered(gw, '127.0.12.1', 5)
  destroyAll(t, busy)
  for (const c of busy) c.write(BODY_PENDING)
  await until('the five requests to be in flight', () => gw.app.drain.inFlight === 5)
  const sixth = await openKeptAlive(gw, '127.0.12.1')
  await closedOnAccept(t, sixth, 'the sixth connection is refused')
  t.equal(stillOpen(busy).length, 5, 'the five busy ones are kept')
  const other = await openKeptAlive(gw, '127.0.22.1')
  destroyAll(t, [other])
  t.equal((await other.send()).status, 401)
  t.equal(sampleValue((await scrape(gw.adminUrl)).samples, 'gateway_connections_refused_total', { reason: 'client_cap' }), 1)
  for (const c of busy) c.destroy()
  await until('a client gone in the middle of its requests to free their connections', () => gw.app.connections.open === 1, 2_000)
})

t.test('a connection not answered yet is never taken: its request may be on its way', async (t) => {
  const gw = await gatewayWith(t, limits(100, 5))
  const opening: KeptAlive[] = []
  for (let i = 0; i < 5; i++) opening.push(await openKeptAlive(gw, '127.0.14.1'))
  destroyAll(t, opening)
  const sixth = await openKeptAlive(gw, '127.0.14.1')
  await closedOnAccept(t, sixth, 'a sixth connection before any is answered is refused')
  for (const c of opening) t.equal((await c.send()).status, 401, 'each of the five first ones is still there and answered')
})

t.test('the cap counts the socket\'s peer: X-Forwarded-For cannot spread one peer, a trusted proxy is exempt', async (t) => {
  const gw = await gatewayWith(t, limits(100, 5), { trustProxy: '127.0.40.0/24' })
  const viaXff: KeptAlive[] = []
  for (let i = 0; i < 8; i++) {
    const c = await openKeptAlive(gw, '127.0.41.1')
    await c.send(`GET /v1/pets HTTP/1.1\r\nhost: gateway\r\nx-forwarded-for: 198.51.100.${i}`)
    viaXff.push(c)
  }
  const proxy = await openAnswered(gw, '127.0.40.1', 8)
  destroyAll(t, viaXff, proxy)
  await until('the untrusted peer to be held to its cap', () => stillOpen(viaXff).length === 5)
  t.equal(stillOpen(proxy).length, 8, 'the trusted proxy keeps all eight: it carries many clients')
})

t.test('IPv6 clients are counted per prefix, like the anonymous limiter', async (t) => {
  if (!await setUpIpv6Loopback()) {
    t.pass('IPv6 per prefix', { skip: 'cannot route 2001:db8::/48 to lo on this machine: no IPv6 source addresses to test with' })
    return
  }
  const backend = await startBackend(t)
  const app = await buildGateway({ config: testConfig(), backendUrl: backend.url, serverLimits: limits(100, 5) })
  t.teardown(() => app.close())
  await app.listen({ host: '2001:db8::1', port: 0 })
  const target = { host: '2001:db8::1', port: (app.server.address() as { port: number }).port }
  const first = await openAnswered(target, '2001:db8:0:1::a', 5)
  const sameNet = await openAnswered(target, '2001:db8:0:1::b', 2)
  const otherNet = await openAnswered(target, '2001:db8:0:2::a', 5)
  destroyAll(t, first, sameNet, otherNet)
  await until('the /64 to be held to its cap', () => stillOpen([...first, ...sameNet]).length === 5)
  t.same(stillOpen(first), first.slice(2), 'a second address of the /64 displaced the first address\'s two oldest')
  t.equal(stillOpen(otherNet).length, 5, 'another /64 has a cap of its own')
})

t.test('keyed traffic on the same connections is unaffected by the guard', async (t) => {
  const gw = await gatewayWith(t, limits(100, 5))
  const c = await openKeptAlive(gw, '127.0.13.1')
  destroyAll(t, [c])
  for (let i = 0; i < 20; i++) {
    const res = await c.send(`GET /v1/pets HTTP/1.1\r\nhost: gateway\r\nauthorization: Bearer ${DEMO_KEYS.pro}`)
    t.equal(res.status, 200)
    t.not(res.headers.connection, 'close')
  }
  t.notOk(c.closed, 'one busy-then-idle connection, reused twenty times')
})
