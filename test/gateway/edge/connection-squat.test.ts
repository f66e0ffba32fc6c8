// Connection slots nobody can squat (issue 33, row 1). The attack: 11 addresses × 920 connections
// that never send a byte (each address under MAX_CONNECTIONS_PER_CLIENT) filled a 10,000 listener;
// connections that had not been answered were never reclaimed, so newcomers were refused and a
// kept-alive client's idle connections were closed for the attacker's. Here at test size (a
// listener of 100), on real sockets from distinct loopback and IPv6 source addresses, the attacker
// reopening every connection the gateway closes: a connection that never completed a request is
// the first to go for a newcomer, a kept-alive client keeps its connection, and silent connections
// are closed at a head deadline, much sooner when the listener is nearly full. The full-size attack
// is bench/idle-squat.ts.
import { performance } from 'node:perf_hooks'
import t, { type Test } from 'tap'
import { buildGateway } from '../../../src/gateway/app.js'
import type { ServerLimits } from '../../../src/gateway/edge/limits.js'
import { startBackend } from '../../helpers/backend.js'
import { startGateway } from '../../helpers/gateway.js'
import { DEMO_KEYS, testConfig } from '../../helpers/config-fixture.js'
import { setUpIpv6Loopback } from '../../helpers/ipv6-loopback.js'
import { openKeptAlive } from '../../helpers/kept-alive.js'
import { sleep, until } from '../../helpers/poll.js'
import { sampleValue, scrape } from '../../helpers/scrape.js'
import { silentFlood } from '../../helpers/silent-connections.js'
import { summary, victimKeptAlive, victimOnNewConnections, type VictimResult } from '../../helpers/victim.js'

const LISTENER = 100
const PER_CLIENT = 16
/** Test-size caps; the head deadline far away unless a test is about it, the 429 streak out of the way. */
function limits (extra: Partial<ServerLimits> = {}): Partial<ServerLimits> {
  return { maxConnections: LISTENER, maxConnectionsPerClient: PER_CLIENT, headTimeoutMs: 60_000, pressureHeadTimeoutMs: 60_000, closeAfterRejections: 1_000_000, ...extra }
}

const VICTIM = { count: 50, intervalMs: 20, key: DEMO_KEYS.enterprise }

function assertServed (t: Test, what: string, r: VictimResult): void {
  t.comment(`${what}: ${summary(r)}`)
  t.ok(r.answered >= 0.99 * r.sent, `${what}: at least 99 % answered (${r.answered}/${r.sent})`)
}

t.test('silent connections from 11 addresses: newcomers take the oldest unused slots, a kept-alive client keeps its connection', async (t) => {
  const gw = await startGateway(t, { serverLimits: limits() })
  const target = { host: '127.0.0.1', port: Number(new URL(gw.url).port) }
  const kept = await openKeptAlive(target, '127.0.90.1')
  t.equal((await kept.send()).status, 401, 'the kept-alive client was answered before the attack')

  const attackers = Array.from({ length: 11 }, (_, i) => `127.0.91.${i + 1}`)
  const flood = silentFlood(target, attackers, 10)
  t.teardown(flood.stop)
  await flood.filled(10_000)
  await until('the listener full', () => gw.app.connections.open === LISTENER)

  const [fresh, alive] = await Promise.all([
    victimOnNewConnections(target, '127.0.92.1', VICTIM),
    victimKeptAlive(target, '127.0.90.1', VICTIM, kept)
  ])
  assertServed(t, 'a new connection per request', fresh)
  assertServed(t, 'the kept-alive client', alive)
  t.equal(alive.reconnects, 0, 'the kept-alive client\'s connection was never taken')
  t.ok(flood.open >= LISTENER - 5, `the attacker still holds most of the listener (${flood.open}): the slots went to the newcomers, one at a time`)

  const { samples } = await scrape(gw.adminUrl)
  // A newcomer finds the listener full unless it came before the attacker refilled the slot the
  // previous newcomer's closed connection freed: a race load decides, so the count is printed.
  const taken = sampleValue(samples, 'gateway_connections_unused_closed_total', { reason: 'server_cap' }) ?? 0
  t.ok(taken >= 1, `newcomers took unused connections' slots (${taken} closed for ${fresh.answered} newcomers answered)`)
  t.equal(sampleValue(samples, 'gateway_connections_reclaimed_total', { reason: 'server_cap' }), 0, 'no idle keep-alive connection was closed')
  flood.stop()
})

t.test('a connection without a complete request head is closed at the deadline; a partial head is answered 408', async (t) => {
  const gw = await startGateway(t, { serverLimits: limits({ headTimeoutMs: 600, pressureHeadTimeoutMs: 100 }) })
  const target = { port: Number(new URL(gw.url).port) }
  const started = performance.now()
  const silent = await openKeptAlive(target, '127.0.93.1')
  const partial = await openKeptAlive(target, '127.0.93.2')
  partial.write('GET /v1/pets HTTP/1.1\r\nhost: gateway\r\n')
  const answered = await openKeptAlive(target, '127.0.93.3')
  t.equal((await answered.send()).status, 401)
  let partialAnswer = ''
  partial.socket.on('data', (chunk: string) => { partialAnswer += chunk })
  await Promise.all([silent.whenClosed, partial.whenClosed])
  const took = performance.now() - started
  t.comment(`silent and partial connections closed after ${Math.round(took)} ms (deadline 600 ms, checked every 100 ms)`)
  t.ok(took >= 550, 'not before the deadline')
  t.ok(took < 5_000, 'long before Node\'s own 10 s headers timeout')
  t.equal(silent.socket.bytesRead, 0, 'nothing sent, nothing answered')
  t.match(partialAnswer, /^HTTP\/1\.1 408 /, 'part of a head: 408')
  t.match(partialAnswer, /"code":"request_timeout"/)
  await sleep(800)
  t.notOk(answered.closed, 'a connection that completed a request is left to the keep-alive timeout')
  answered.destroy()
  const { samples } = await scrape(gw.adminUrl)
  t.equal(sampleValue(samples, 'gateway_connections_unused_closed_total', { reason: 'head_timeout' }), 2)
})

t.test('while the listener is nearly full, the head deadline is much shorter', async (t) => {
  const gw = await startGateway(t, { serverLimits: limits({ headTimeoutMs: 30_000, pressureHeadTimeoutMs: 300 }) })
  const target = { host: '127.0.0.1', port: Number(new URL(gw.url).port) }
  // 6 × 16 = 96 silent connections, each reopened when closed: the listener stays over 90 % full.
  const flood = silentFlood(target, Array.from({ length: 6 }, (_, i) => `127.0.94.${i + 1}`), PER_CLIENT)
  t.teardown(flood.stop)
  const started = performance.now()
  await flood.filled(10_000)
  await until('as many closes as connections', () => flood.closedByServer >= 96, 10_000)
  const took = performance.now() - started
  t.comment(`96 silent connections closed within ${Math.round(took)} ms (deadline 30 s, 300 ms while nearly full); open now ${gw.app.connections.open}`)
  t.ok(took < 5_000, 'at the short deadline, not the normal one')
  const { samples } = await scrape(gw.adminUrl)
  t.ok((sampleValue(samples, 'gateway_connections_unused_closed_total', { reason: 'head_timeout' }) ?? 0) >= 96, 'each closed for want of a request head')
  flood.stop()
  await until('the listener empty', () => gw.app.connections.open === 0)
  const quiet = await openKeptAlive(target, '127.0.94.10')
  await sleep(800)
  t.notOk(quiet.closed, 'with the listener no longer nearly full, the normal deadline applies again')
  quiet.destroy()
})

t.test('from 16 IPv6 prefixes: a victim on another prefix is served, new and kept-alive', async (t) => {
  if (!await setUpIpv6Loopback()) {
    t.pass('IPv6 squatting', { skip: 'cannot route 2001:db8::/48 to lo on this machine: no IPv6 source addresses to test with' })
    return
  }
  const backend = await startBackend(t)
  const app = await buildGateway({ config: testConfig(), backendUrl: backend.url, serverLimits: limits(), loadShedding: { queueDelayMs: 0 } })
  t.teardown(() => app.close())
  await app.listen({ host: '2001:db8::1', port: 0 })
  const target = { host: '2001:db8::1', port: (app.server.address() as { port: number }).port }
  const kept = await openKeptAlive(target, '2001:db8:0:ff::1')
  t.equal((await kept.send()).status, 401)
  // One address per /64 (the per-client unit), each under its cap: 16 × 8 = 128 for 100 slots.
  const flood = silentFlood(target, Array.from({ length: 16 }, (_, i) => `2001:db8:0:${(i + 1).toString(16)}::a`), 8)
  t.teardown(flood.stop)
  await flood.filled(10_000)
  await until('the listener full', () => app.connections.open === LISTENER)
  const [fresh, alive] = await Promise.all([
    victimOnNewConnections(target, '2001:db8:0:fe::1', VICTIM),
    victimKeptAlive(target, '2001:db8:0:ff::1', VICTIM, kept)
  ])
  assertServed(t, 'IPv6, a new connection per request', fresh)
  assertServed(t, 'IPv6, the kept-alive client', alive)
  t.equal(alive.reconnects, 0)
  flood.stop()
})
