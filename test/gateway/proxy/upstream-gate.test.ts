// The upstream gate's decisions on an injected clock: who gets a connection, who waits, who is
// shed and with what Retry-After. The HTTP behaviour against a real slow backend is in
// upstream-budget.test.ts.
import t from 'tap'
import { UpstreamGate, type UpstreamShedReason, type UpstreamWaiter } from '../../../src/gateway/proxy/upstream-gate.js'

interface Probe extends UpstreamWaiter {
  dispatched: number | undefined
  shedAs: { reason: UpstreamShedReason, retryAfter: number } | undefined
  gone: boolean
}

function waiter (): Probe {
  const w: Probe = {
    enteredAt: -1,
    dispatched: undefined,
    shedAs: undefined,
    gone: false,
    dispatch (remainingMs) { w.dispatched = remainingMs },
    failed () {},
    shed (reason, retryAfter) { w.shedAs = { reason, retryAfter } },
    abandoned: () => w.gone
  }
  return w
}

function clock (): { now: () => number, advance: (ms: number) => void } {
  let ms = 1_000
  return { now: () => ms, advance: (by) => { ms += by } }
}

t.test('up to `connections` dispatch at once with the whole budget; the rest wait in order', async (t) => {
  const c = clock()
  const gate = new UpstreamGate({ connections: 2, budgetMs: 1000, now: c.now })
  const [a, b, d, e] = [waiter(), waiter(), waiter(), waiter()]
  for (const w of [a, b, d, e]) gate.enter(w)
  t.same([a.dispatched, b.dispatched, d.dispatched, e.dispatched], [1000, 1000, undefined, undefined])
  t.same([gate.inFlight, gate.queued], [2, 2])
  c.advance(100)
  gate.release(1_000)
  t.equal(d.dispatched, 900, 'the oldest waiter, with what is left of its budget')
  t.equal(e.dispatched, undefined)
  t.equal(gate.serviceMs, 100, 'the first answer sets the pace')
  gate.close()
})

t.test('a wait the queue predicts beyond the budget is shed at once, with the predicted wait as Retry-After', async (t) => {
  const c = clock()
  const gate = new UpstreamGate({ connections: 2, budgetMs: 10_000, now: c.now })
  const first = [waiter(), waiter()]
  for (const w of first) gate.enter(w)
  c.advance(4_000)
  gate.release(1_000)
  gate.release(1_000)
  t.equal(gate.serviceMs, 4_000)
  // Busy again; waiters 1–2 wait for the first answers (4 s) and take 4 s (+10 %) themselves: within 10 s.
  gate.enter(waiter())
  gate.enter(waiter())
  const queued = [waiter(), waiter()]
  for (const w of queued) gate.enter(w)
  t.same(queued.map((w) => w.shedAs), [undefined, undefined])
  const late = waiter()
  gate.enter(late)
  t.same(late.shedAs, { reason: 'budget', retryAfter: 8 }, 'position 3 waits for the second answers, 8 s, and would take 4 more')
  t.same(gate.shed, { queue_full: 0, budget: 1 })
  gate.close()
})

t.test('the standing delay: the shortest wait of those dispatched since the last reading, else the oldest waiter\'s age, else 0', async (t) => {
  const c = clock()
  const gate = new UpstreamGate({ connections: 1, budgetMs: 10_000, now: c.now })
  t.equal(gate.takeStandingDelayMs(), 0, 'nothing waited')
  gate.enter(waiter())
  t.equal(gate.takeStandingDelayMs(), 0, 'dispatched at once')
  gate.enter(waiter())
  gate.enter(waiter())
  c.advance(40)
  t.equal(gate.takeStandingDelayMs(), 40, 'none dispatched: the oldest has waited 40 ms')
  gate.release(c.now() - 40)
  c.advance(10)
  gate.release(c.now() - 10)
  t.equal(gate.takeStandingDelayMs(), 40, 'two dispatched, after 40 and 50 ms: the shortest')
  t.equal(gate.takeStandingDelayMs(), 0, 'read: reset, and nobody waits')
  gate.close()
})

t.test('a full queue is shed as queue_full; Retry-After stays within 1 s and the budget', async (t) => {
  const gate = new UpstreamGate({ connections: 1, queueMax: 1, budgetMs: 3_000, now: clock().now })
  gate.enter(waiter())
  gate.enter(waiter())
  const over = waiter()
  gate.enter(over)
  t.same(over.shedAs, { reason: 'queue_full', retryAfter: 1 }, 'pace unknown: 1 s')
  const none = new UpstreamGate({ connections: 1, queueMax: 0, budgetMs: 3_000, now: clock().now })
  none.enter(waiter())
  const refused = waiter()
  none.enter(refused)
  t.equal(refused.shedAs?.reason, 'queue_full', 'UPSTREAM_QUEUE_MAX=0: no waiting at all')
  gate.close()
  none.close()
})

t.test('a waiter whose budget would run out before the backend answers is shed when its turn comes', async (t) => {
  const c = clock()
  const gate = new UpstreamGate({ connections: 1, budgetMs: 1_000, now: c.now })
  const holder = waiter()
  gate.enter(holder)
  const next = waiter()
  gate.enter(next)
  c.advance(700)
  gate.release(1_000)
  t.same(next.shedAs?.reason, 'budget', '300 ms left, the backend takes 700')
  t.equal(gate.inFlight, 0)
})

t.test('waiters whose client left are skipped; expired ones are shed by the deadline timer', async (t) => {
  const gate = new UpstreamGate({ connections: 1, budgetMs: 30 })
  gate.enter(waiter())
  const left = waiter()
  const expired = waiter()
  gate.enter(left)
  gate.enter(expired)
  left.gone = true
  await new Promise((resolve) => setTimeout(resolve, 80))
  t.equal(left.shedAs, undefined, 'nobody to answer')
  t.equal(expired.shedAs?.reason, 'budget')
  t.equal(gate.queued, 0)
  const after = waiter()
  gate.enter(after)
  gate.release(0)
  t.equal(after.dispatched !== undefined || after.shedAs !== undefined, true)
  gate.close()
})

t.test('a long queue keeps its order across the array compaction, and close() sheds every waiter', async (t) => {
  const c = clock()
  const gate = new UpstreamGate({ connections: 1, queueMax: 5_000, budgetMs: 1e9, now: c.now })
  gate.enter(waiter())
  const ws = Array.from({ length: 3_000 }, () => waiter())
  for (const w of ws) gate.enter(w)
  for (let i = 0; i < 2_000; i++) gate.release(c.now())
  t.equal(ws[1_999]?.dispatched !== undefined, true)
  t.equal(ws[2_000]?.dispatched, undefined, 'FIFO: exactly the first 2,000 waiters had a turn')
  t.equal(gate.queued, 1_000)
  gate.close()
  t.ok(ws.slice(2_000).every((w) => w.shedAs?.reason === 'budget'), 'closing answers everyone still waiting')
  t.equal(gate.queued, 0)
})

t.test('a waiter whose dispatch throws gives its connection back at once and is told so; the next waiter gets it (issue 39)', async (t) => {
  const c = clock()
  const gate = new UpstreamGate({ connections: 1, budgetMs: 1000, now: c.now })
  const first = waiter()
  const failures: unknown[] = []
  const broken: UpstreamWaiter = { ...waiter(), dispatch () { throw new TypeError('a socket that is gone') }, failed (err) { failures.push(err) } }
  gate.enter(first)
  gate.enter(broken)
  const after = waiter()
  gate.enter(after)
  t.same([gate.inFlight, gate.queued], [1, 2])
  gate.release(1_000)
  t.equal(failures.length, 1, 'the broken waiter is told')
  t.equal(after.dispatched, 1000, 'the next waiter got the connection the broken one gave back')
  t.same([gate.inFlight, gate.queued], [1, 0], 'exactly one connection held')
  gate.release(1_000)
  t.equal(gate.inFlight, 0)
  // The same at once, with a free connection.
  gate.enter(broken)
  t.same([gate.inFlight, failures.length], [0, 2], 'a dispatch that throws at once holds nothing')
})

t.test('stalledMs: only a full gate with requests turned away and no connection given back counts, from when it filled or last gave one back', async (t) => {
  const c = clock()
  const gate = new UpstreamGate({ connections: 2, budgetMs: 60_000, now: c.now })
  c.advance(10_000)
  t.equal(gate.stalledMs(c.now()), 0, 'idle')
  gate.enter(waiter())
  gate.enter(waiter())
  c.advance(5_000)
  t.equal(gate.stalledMs(c.now()), 0, 'full, but nobody waits')
  gate.enter(waiter())
  c.advance(1_000)
  t.equal(gate.stalledMs(c.now()), 6_000, 'full since it filled, a request waiting')
  gate.release(c.now() - 6_000)
  c.advance(2_000)
  t.equal(gate.stalledMs(c.now()), 0, 'the waiter got the connection given back: full again, nobody waits')
  gate.enter(waiter())
  t.equal(gate.stalledMs(c.now()), 2_000, 'another waits: counted from the last connection given back')
  gate.release(c.now())
  t.equal(gate.stalledMs(c.now()), 0, 'a connection free')
})
