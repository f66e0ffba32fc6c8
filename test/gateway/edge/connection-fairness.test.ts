// Slot pressure an attacker cannot turn on legitimate clients (issue 39, rows 3 and 4). The attacks:
// ten addresses × 1,000 connections that each fetched /v1/openapi.json once and then idled kept the
// listener ≥ 90 % full, and because used idle connections counted toward "nearly full", every new
// connection got the 1 s pressure head deadline: a client on a slow link (2.5 s head) failed 0–2 of
// 8. And a full listener reclaimed its oldest idle connection in accept order, so a legitimate
// keep-alive connection used once went before the attacker's newer idle ones. Here at test size
// (listeners of tens, the head deadlines scaled down with the slow head), on real sockets from
// distinct loopback addresses, the attacker reopening and using again what the gateway closes.
import { connect } from 'node:net'
import { performance } from 'node:perf_hooks'
import t from 'tap'
import type { ServerLimits } from '../../../src/gateway/edge/limits.js'
import { OPENAPI_PATH } from '../../../src/gateway/openapi/plugin.js'
import { startGateway, type StartedGateway } from '../../helpers/gateway.js'
import { openKeptAlive, type KeptAlive, type KeptAliveTarget } from '../../helpers/kept-alive.js'
import { sleep, until } from '../../helpers/poll.js'
import { sampleValue, scrape } from '../../helpers/scrape.js'

const OPENAPI_HEAD = `GET ${OPENAPI_PATH} HTTP/1.1\r\nhost: gateway`

function limits (extra: Partial<ServerLimits>): Partial<ServerLimits> {
  return { closeAfterRejections: 1_000_000, ...extra }
}

function targetOf (gw: StartedGateway): KeptAliveTarget {
  return { port: Number(new URL(gw.url).port) }
}

/**
 * Connections from `addresses` (`perAddress` each) that fetch the OpenAPI description once and
 * idle; one the gateway closes is opened and used again at once while the flood runs.
 */
function usedIdleFlood (target: KeptAliveTarget, addresses: readonly string[], perAddress: number) {
  const open = new Set<KeptAlive>()
  let running = true
  let reopened = 0
  async function hold (address: string): Promise<void> {
    while (running) {
      let connection: KeptAlive
      try {
        connection = await openKeptAlive(target, address)
      } catch {
        await sleep(20)
        continue
      }
      open.add(connection)
      try {
        await connection.send(OPENAPI_HEAD)
      } catch {
        // closed before its answer: reopened below
      }
      await connection.whenClosed
      open.delete(connection)
      if (running) reopened++
    }
  }
  for (const address of addresses) for (let i = 0; i < perAddress; i++) void hold(address)
  return {
    get open () { return open.size },
    get reopened () { return reopened },
    stop () {
      running = false
      for (const connection of open) connection.destroy()
    }
  }
}

/** A client on a slow link: its request head in `chunks` pieces over `spreadMs`; resolves with the status, 0 when closed unanswered. */
async function slowClient (target: KeptAliveTarget, localAddress: string, spreadMs: number, chunks = 5): Promise<number> {
  const socket = connect({ host: '127.0.0.1', port: target.port, localAddress })
  socket.setEncoding('latin1')
  socket.on('error', () => {})
  let answer = ''
  const done = new Promise<number>((resolve) => {
    socket.on('data', (chunk: string) => {
      answer += chunk
      if (answer.includes('\r\n\r\n')) resolve(Number(answer.slice(9, 12)))
    })
    socket.once('close', () => { resolve(0) })
  })
  const head = `${OPENAPI_HEAD}\r\nuser-agent: slow-link\r\naccept: application/json\r\n\r\n`
  const size = Math.ceil(head.length / chunks)
  for (let i = 0; i < chunks && !socket.destroyed; i++) {
    if (i > 0) await sleep(spreadMs / (chunks - 1))
    socket.write(head.slice(i * size, (i + 1) * size))
  }
  const status = await done
  socket.destroy()
  return status
}

t.test('row 3: used idle connections filling the listener do not shorten a newcomer\'s head deadline', async (t) => {
  // 10 × 10 used idle connections in a listener of 110 (91 %); the head deadline 2 s, 300 ms under pressure; heads over 750 ms.
  const gw = await startGateway(t, { serverLimits: limits({ maxConnections: 110, maxConnectionsPerClient: 16, headTimeoutMs: 2_000, pressureHeadTimeoutMs: 300 }) })
  const target = targetOf(gw)
  const flood = usedIdleFlood(target, Array.from({ length: 10 }, (_, i) => `127.0.95.${i + 1}`), 10)
  t.teardown(flood.stop)
  await until('the attack to hold 100 used idle connections', () => gw.app.connections.open === 100 && gw.app.connections.fresh === 0)
  const started = performance.now()
  const statuses = await Promise.all(Array.from({ length: 8 }, (_, i) => slowClient(target, `127.0.96.${i + 1}`, 750)))
  t.comment(`8 slow clients (head over 750 ms) with the listener at ${gw.app.connections.open}/110: ${statuses.join(' ')} in ${Math.round(performance.now() - started)} ms`)
  t.same(statuses, Array(8).fill(200), 'every slow client is answered')
  const { samples } = await scrape(gw.adminUrl)
  t.equal(sampleValue(samples, 'gateway_connections_unused_closed_total', { reason: 'head_timeout' }), 0, 'no connection was closed at a head deadline')
  flood.stop()
})

t.test('row 3 at the cap: a persistent attacker refilling a full listener cannot take a slow client\'s slot', async (t) => {
  const gw = await startGateway(t, { serverLimits: limits({ maxConnections: 100, maxConnectionsPerClient: 12, headTimeoutMs: 2_000, pressureHeadTimeoutMs: 300 }) })
  const target = targetOf(gw)
  const flood = usedIdleFlood(target, Array.from({ length: 10 }, (_, i) => `127.0.97.${i + 1}`), 11)
  t.teardown(flood.stop)
  // 110 holders for 100 slots: the ten without a slot keep reopening, so at any instant up to ten
  // accepted connections may still be fresh (their head not yet read). Wait for the listener full
  // and the attacker refilling it, not for an instant with no newcomer at all.
  await until('the attack to fill the listener with used idle connections', () => gw.app.connections.open === 100 && gw.app.connections.fresh <= 10 && flood.reopened >= 10, 30_000)
  t.comment(`listener ${gw.app.connections.open}/100, ${gw.app.connections.fresh} fresh, ${flood.reopened} reopened so far`)
  const statuses: number[] = []
  for (let round = 0; round < 2; round++) {
    statuses.push(...await Promise.all(Array.from({ length: 8 }, (_, i) => slowClient(target, `127.0.98.${round * 8 + i + 1}`, 750))))
  }
  const answered = statuses.filter((s) => s === 200).length
  t.comment(`16 slow clients at a full listener, the attacker reopening (${flood.reopened} reopened): ${answered}/16 answered; ${statuses.join(' ')}`)
  t.ok(flood.reopened >= 16, 'the attacker refilled every slot it lost')
  t.equal(answered, 16, 'every slow client is answered (≥ 99 %)')
  flood.stop()
})

t.test('row 4: a legitimate keep-alive connection used once outlasts an attacker\'s newer idle connections', async (t) => {
  const gw = await startGateway(t, { serverLimits: limits({ maxConnections: 30, maxConnectionsPerClient: 16, headTimeoutMs: 60_000, pressureHeadTimeoutMs: 60_000 }) })
  const target = targetOf(gw)
  const legitimate = await openKeptAlive(target, '127.0.99.1')
  t.teardown(() => legitimate.destroy())
  t.equal((await legitimate.send()).status, 401, 'used once')
  const attacker: KeptAlive[] = []
  t.teardown(() => { for (const c of attacker) c.destroy() })
  for (const [address, count] of [['127.0.100.1', 15], ['127.0.100.2', 14]] as const) {
    for (let i = 0; i < count; i++) {
      const c = await openKeptAlive(target, address)
      await c.send(OPENAPI_HEAD)
      attacker.push(c)
    }
  }
  t.equal(gw.app.connections.open, 30, 'the listener is full')
  // Newcomers, each taking a slot: from the address holding the most, its least recently active.
  for (let i = 0; i < 4; i++) {
    const newcomer = await openKeptAlive(target, `127.0.101.${i + 1}`)
    t.teardown(() => newcomer.destroy())
    t.equal((await newcomer.send()).status, 401, `newcomer ${i + 1} answered`)
  }
  await sleep(100)
  t.notOk(legitimate.closed, 'the legitimate connection was not reclaimed')
  t.equal((await legitimate.send()).status, 401, 'and is answered again on the same connection')
  const closed = attacker.filter((c) => c.closed)
  t.equal(closed.length, 4, 'four of the attacker\'s connections gave way')
  // 15/14 → 14/14 → (tie: the least recently active of the two) 13/14 → 13/13 → (tie) 12/13.
  t.same(closed, [attacker[0], attacker[1], attacker[2], attacker[15]], 'always from the address holding the most, each address\'s least recently active first')
  t.equal(sampleValue((await scrape(gw.adminUrl)).samples, 'gateway_connections_reclaimed_total', { reason: 'server_cap' }), 4)
})

t.test('row 4 from many addresses: between clients holding as many, the least recently active connection goes', async (t) => {
  const gw = await startGateway(t, { serverLimits: limits({ maxConnections: 6, maxConnectionsPerClient: 16, headTimeoutMs: 60_000, pressureHeadTimeoutMs: 60_000 }) })
  const target = targetOf(gw)
  const legitimate = await openKeptAlive(target, '127.0.102.1')
  t.teardown(() => legitimate.destroy())
  t.equal((await legitimate.send()).status, 401)
  const attacker: KeptAlive[] = []
  t.teardown(() => { for (const c of attacker) c.destroy() })
  for (let i = 0; i < 5; i++) {
    const c = await openKeptAlive(target, `127.0.103.${i + 1}`)
    await c.send(OPENAPI_HEAD)
    attacker.push(c)
  }
  // The legitimate client uses its connection again: now the most recently active of all.
  t.equal((await legitimate.send()).status, 401)
  const newcomer = await openKeptAlive(target, '127.0.104.1')
  t.teardown(() => newcomer.destroy())
  t.equal((await newcomer.send()).status, 401)
  await until('one connection to give way', () => attacker.some((c) => c.closed) || legitimate.closed, 3_000)
  t.notOk(legitimate.closed, 'the legitimate connection, accepted first but used last, is kept')
  t.same(attacker.filter((c) => c.closed), [attacker[0]], 'the least recently active attacker connection went')
})

t.test('a client at its own cap gives up its least recently active idle connection, not its oldest', async (t) => {
  const gw = await startGateway(t, { serverLimits: limits({ maxConnections: 100, maxConnectionsPerClient: 4, headTimeoutMs: 60_000, pressureHeadTimeoutMs: 60_000 }) })
  const target = targetOf(gw)
  const own: KeptAlive[] = []
  t.teardown(() => { for (const c of own) c.destroy() })
  for (let i = 0; i < 4; i++) {
    const c = await openKeptAlive(target, '127.0.105.1')
    await c.send()
    own.push(c)
  }
  t.equal((await own[0]!.send()).status, 401, 'the oldest connection is used again')
  const fifth = await openKeptAlive(target, '127.0.105.1')
  own.push(fifth)
  t.equal((await fifth.send()).status, 401)
  await until('one of the four to give way', () => own.some((c) => c.closed), 3_000)
  t.same(own.filter((c) => c.closed), [own[1]], 'the least recently active went; the oldest, used since, stays')
})
