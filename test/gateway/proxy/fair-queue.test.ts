// Waiting for a backend connection, consumer by consumer in turn (issue 33, row 2: a pipelined
// flood's requests queued for the backend ahead of everyone's, so another consumer's request waited
// behind all of them). The queue on its own, the gate with lanes on an injected clock, and a real
// gateway whose backend holds its requests: another consumer's request reaches the backend on the
// next free connection, not after the flood.
import t from 'tap'
import { FairQueue } from '../../../src/gateway/proxy/fair-queue.js'
import { UpstreamGate, type UpstreamWaiter } from '../../../src/gateway/proxy/upstream-gate.js'
import { startHeldUpstream } from '../../helpers/echo-upstream.js'
import { startGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS } from '../../helpers/config-fixture.js'
import { until } from '../../helpers/poll.js'

interface Item { lane?: string, enteredAt: number, name: string }
const item = (name: string, lane?: string): Item => ({ name, lane, enteredAt: 0 })

t.test('lanes are served in turn, each in its order; the oldest overall stays at hand', async (t) => {
  const q = new FairQueue<Item>()
  for (const i of [item('a1', 'a'), item('a2', 'a'), item('a3', 'a'), item('b1', 'b'), item('a4', 'a'), item('c1', 'c')]) q.push(i)
  t.equal(q.size, 6)
  t.equal(q.position('b'), 6, 'b has one waiting: a new one of b comes after a round of every lane, or last')
  t.equal(q.position('d'), 4, 'a new lane: after one of each of the three')
  t.equal(q.oldest()?.name, 'a1')
  const order: string[] = []
  for (let i = q.takeNext(); i !== undefined; i = q.takeNext()) order.push(i.name)
  t.same(order, ['a1', 'b1', 'c1', 'a2', 'a3', 'a4'])
  t.equal(q.size, 0)
  t.equal(q.oldest(), undefined)

  for (const i of [item('a1', 'a'), item('b1', 'b'), item('a2', 'a'), item('b2', 'b')]) q.push(i)
  t.equal(q.takeNext()?.name, 'a1')
  t.equal(q.takeOldest()?.name, 'b1', 'the oldest still waiting, whatever was taken in turn before it')
  t.equal(q.oldest()?.name, 'a2')
  t.same([q.takeNext()?.name, q.takeNext()?.name, q.takeNext()], ['b2', 'a2', undefined], 'b\'s turn was next, and stays')
  const plain = new FairQueue<Item>()
  for (const name of ['x', 'y', 'z']) plain.push(item(name))
  t.same([plain.takeNext()?.name, plain.takeNext()?.name, plain.takeNext()?.name], ['x', 'y', 'z'], 'no lane: one queue, in order')
})

t.test('a waiter removed before its turn stops counting at once and is never taken; its lane goes with its last waiter', async (t) => {
  const q = new FairQueue<Item>()
  const a1 = item('a1', 'a')
  const b1 = item('b1', 'b')
  const a2 = item('a2', 'a')
  const c1 = item('c1', 'c')
  for (const i of [a1, b1, a2, c1]) q.push(i)
  t.ok(q.remove(a1), 'a waiting item is removed')
  t.notOk(q.remove(a1), 'only once')
  t.equal(q.size, 3, 'it no longer counts')
  t.equal(q.oldest()?.name, 'b1', 'the oldest still waiting')
  t.ok(q.remove(b1))
  t.equal(q.position('b'), 3, 'b\'s lane left with its last waiter: b is a new lane again, after one of each of a and c')
  t.equal(q.position('a'), 3, 'a has one waiting (a2), not two')
  t.same([q.takeNext()?.name, q.takeNext()?.name, q.takeNext()], ['a2', 'c1', undefined], 'the removed are skipped, the rest in turn')
  t.equal(q.size, 0)
  const lone = item('x')
  q.push(lone)
  q.remove(lone)
  t.equal(q.takeOldest(), undefined, 'nothing left to take')
})

t.test('the gate with lanes: a consumer\'s one request is next after the flood\'s first', async (t) => {
  let now = 0
  const gate = new UpstreamGate({ connections: 1, budgetMs: 1_000, now: () => now })
  const seen: string[] = []
  const waiter = (name: string, lane: string): UpstreamWaiter => ({ lane, enteredAt: 0, dispatch: () => { seen.push(name) }, failed: () => {}, shed: () => { seen.push(`${name} shed`) }, abandoned: () => false })
  gate.enter(waiter('f0', 'flood'))
  for (let i = 1; i <= 5; i++) gate.enter(waiter(`f${i}`, 'flood'))
  gate.enter(waiter('v1', 'victim'))
  t.equal(gate.takeStandingDelayMs(), 0, 'f0 got a connection at once')
  now += 10
  gate.release(0)
  now += 10
  gate.release(10)
  t.same(seen, ['f0', 'f1', 'v1'], 'the victim waited for one of the flood\'s, not five')
  t.equal(gate.queued, 4)
  t.equal(gate.takeStandingDelayMs(), 10, 'the standing delay is the flood\'s oldest waiter\'s age when each got a connection (10 and 20 ms), not the victim\'s short wait')
  gate.close()
})

t.test('through the gateway: with two backend connections busy and 20 of one consumer waiting, another consumer\'s request is sent within one round', async (t) => {
  const upstream = await startHeldUpstream(t)
  const gw = await startGateway(t, { backendUrl: upstream.url, upstreamConnections: 2 })
  const send = async (key: string): Promise<number> => {
    const res = await fetch(`${gw.url}/v1/pets`, { headers: bearer(key) })
    await res.arrayBuffer()
    return res.status
  }
  const flood = Array.from({ length: 22 }, async () => await send(DEMO_KEYS.business))
  await until('2 sent, 20 waiting', () => upstream.received.length === 2 && gw.app.upstream.queued === 20)
  const other = send(DEMO_KEYS.pro)
  await until('the other consumer waiting', () => gw.app.upstream.queued === 21)
  upstream.releaseOne()
  upstream.releaseOne()
  await until('two more sent', () => upstream.received.length === 4)
  const next = upstream.received.slice(2).map((r) => r.headers['x-consumer-id'])
  t.ok(next.includes('demo-pro'), `the other consumer's request took one of the next two free connections (${next.join(', ')}), not the 21st`)
  upstream.release()
  t.equal(await other, 200)
  t.same(new Set(await Promise.all(flood)), new Set([200]))
})
