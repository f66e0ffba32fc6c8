// The breakers on their own, on an injected clock and an injected probe: opening after consecutive
// failures, refusing every call while open (no request probes), the breaker's own probes (soon,
// backing off to the cool-down, at once when the connection is ready again) and the only way it
// closes (an answered probe, never a late answer to a request), opening at once when a connection
// drops, one breaker per shard, and the stale-shard cleanup.
import t from 'tap'
import { createBreakers, STALE_SHARD_COOLDOWNS, type BreakerOptions } from '../../../../src/gateway/limiter/stores/breakers.js'
import { until } from '../../../helpers/poll.js'

function setup (opts: Partial<BreakerOptions> = {}): { clock: { now: number }, changes: boolean[], probes: string[], answer: { ok: boolean }, breakers: ReturnType<typeof createBreakers> } {
  const clock = { now: 1_000_000 }
  const changes: boolean[] = []
  const probes: string[] = []
  const answer = { ok: false }
  const breakers = createBreakers({
    failures: 3,
    coolDownMs: 200,
    firstProbeMs: 20,
    now: () => clock.now,
    onChange: (open) => changes.push(open),
    probe: async (shard) => {
      probes.push(shard)
      if (!answer.ok) throw new Error('no answer')
    },
    ...opts
  })
  t.teardown(() => { breakers.close() })
  return { clock, changes, probes, answer, breakers }
}

t.test('opens after three consecutive failures and refuses every call until a probe is answered', async (t) => {
  const { changes, probes, answer, breakers } = setup()
  const b = breakers.of('')
  breakers.settle(b, false)
  breakers.settle(b, false)
  breakers.settle(b, true)
  t.equal(b.failures, 0, 'an answer resets the count: failures must be consecutive')
  t.equal(b.failedSince, undefined, 'and the failure time')
  for (let i = 0; i < 3; i++) breakers.settle(b, false)
  t.equal(b.open, true)
  t.ok(b.failedSince !== undefined, 'the first failure of the run is remembered (the fallback reads it)')
  t.same(changes, [true], 'opened once')
  t.equal(breakers.pass(b), 'refused')
  t.equal(breakers.refusing(b), true)
  breakers.settle(b, true)
  t.equal(b.open, true, 'a late answer to a request does not close it: only a probe does')
  await until('probed and backing off', () => probes.length >= 3, 2_000, 5)
  t.equal(breakers.pass(b), 'refused', 'failed probes keep it open')
  answer.ok = true
  await until('closed by an answered probe', () => !b.open, 2_000, 5)
  t.same(changes, [true, false])
  t.equal(breakers.pass(b), 'call')
  t.equal(b.failedSince, undefined)
})

t.test('a probe needs no request: an open breaker closes by itself', async (t) => {
  const { answer, breakers, changes } = setup()
  const b = breakers.of('')
  answer.ok = true
  for (let i = 0; i < 3; i++) breakers.settle(b, false)
  await until('closed with no call at all', () => changes.length === 2, 2_000, 5)
  t.same(changes, [true, false])
})

t.test('probes back off from the first delay to the cool-down, and run at once when the connection is ready', async (t) => {
  const { probes, answer, breakers } = setup({ coolDownMs: 10_000, firstProbeMs: 30 })
  const b = breakers.of('')
  for (let i = 0; i < 3; i++) breakers.settle(b, false)
  await until('first probe', () => probes.length === 1, 2_000, 2)
  await until('second probe after doubling', () => probes.length === 2, 2_000, 2)
  t.equal(b.backoff, 120, 'doubled after each failed probe')
  answer.ok = true
  breakers.nudge(b)
  await until('nudged: probed now, not in 120 ms', () => !b.open, 100, 2)
})

t.test('a dropped connection opens the breaker at once, whatever the failure count', async (t) => {
  const { changes, probes, answer, breakers } = setup({ coolDownMs: 10_000, firstProbeMs: 10_000 })
  const b = breakers.of('')
  breakers.suspect(b)
  t.equal(b.open, true)
  t.equal(breakers.pass(b), 'refused')
  await until('probed at once, not after the first delay', () => probes.length === 1, 1_000, 2)
  answer.ok = true
  breakers.nudge(b)
  await until('closed', () => !b.open, 1_000, 2)
  t.same(changes, [true, false])
})

t.test('one breaker per shard: a lost node opens its own, the state changes once for all', async (t) => {
  const { changes, breakers } = setup()
  const [a, b] = [breakers.of('10.0.0.1:7000'), breakers.of('10.0.0.2:7000')]
  for (let i = 0; i < 3; i++) breakers.settle(a, false)
  t.same([breakers.pass(a), breakers.pass(b)], ['refused', 'call'])
  for (let i = 0; i < 3; i++) breakers.settle(b, false)
  t.same(changes, [true], 'the second open breaker changes nothing outside')
  t.equal(breakers.all().length, 2)
})

t.test('stale shards: forgotten by the sweep, never by a query; the unsharded one stays', async (t) => {
  const { clock, changes, breakers } = setup({ coolDownMs: 1_000 })
  const gone = breakers.of('10.0.0.1:7000')
  const single = breakers.of('')
  for (let i = 0; i < 3; i++) { breakers.settle(gone, false); breakers.settle(single, false) }
  clock.now += (STALE_SHARD_COOLDOWNS + 1) * 1_000 + 1
  for (let i = 0; i < 5; i++) t.equal(breakers.anyOpen(), true, 'asking changes nothing')
  breakers.sweepStale()
  t.same(breakers.all(), [single], 'the shard no request asked for is forgotten; the unsharded breaker is not')
  t.same(changes, [true], 'one breaker still open')

  const asked = breakers.of('10.0.0.3:7000')
  for (let i = 0; i < 3; i++) breakers.settle(asked, false)
  clock.now += (STALE_SHARD_COOLDOWNS + 1) * 1_000 + 1
  breakers.pass(asked)
  breakers.sweepStale()
  t.ok(breakers.all().includes(asked), 'a shard requests still ask for is not stale')
})

t.test('the sweep runs on a timer while a breaker is open', async (t) => {
  const { clock, changes, breakers } = setup({ coolDownMs: 20 })
  const gone = breakers.of('10.0.0.1:7000')
  for (let i = 0; i < 3; i++) breakers.settle(gone, false)
  clock.now += (STALE_SHARD_COOLDOWNS + 1) * 20 + 1
  await until('the stale shard swept', () => !breakers.anyOpen(), 2_000, 5)
  t.same(changes, [true, false], 'the last open breaker gone: closed')
})
