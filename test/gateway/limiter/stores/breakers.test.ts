// The breakers on their own, on an injected clock: opening after consecutive failures, refusing
// during the cool-down, one probe at a time, closing on an answer, one breaker per shard, and the
// stale-shard cleanup — an explicit step (and its timer), never a side effect of asking.
import t from 'tap'
import { createBreakers, STALE_SHARD_COOLDOWNS } from '../../../../src/gateway/limiter/stores/breakers.js'
import { until } from '../../../helpers/poll.js'

function setup (coolDownMs = 1_000): { clock: { now: number }, changes: boolean[], breakers: ReturnType<typeof createBreakers> } {
  const clock = { now: 1_000_000 }
  const changes: boolean[] = []
  const breakers = createBreakers({ failures: 3, coolDownMs, now: () => clock.now, onChange: (open) => changes.push(open) })
  t.teardown(() => { breakers.close() })
  return { clock, changes, breakers }
}

t.test('opens after three consecutive failures, refuses during the cool-down, probes once, closes on an answer', async (t) => {
  const { clock, changes, breakers } = setup()
  const b = breakers.of('')
  breakers.settle(b, false, breakers.pass(b))
  breakers.settle(b, false, breakers.pass(b))
  breakers.settle(b, true, breakers.pass(b))
  t.equal(b.failures, 0, 'an answer resets the count: failures must be consecutive')
  for (let i = 0; i < 3; i++) breakers.settle(b, false, breakers.pass(b))
  t.equal(b.open, true)
  t.same(changes, [true], 'opened once')
  t.equal(breakers.pass(b), 'refused', 'refused during the cool-down')
  t.equal(breakers.refusing(b), true)
  clock.now += 1_000
  t.equal(breakers.refusing(b), false)
  t.equal(breakers.pass(b), 'probe', 'the cool-down over: one call probes')
  t.equal(breakers.pass(b), 'refused', 'while it probes, others are refused')
  breakers.settle(b, false, 'probe')
  t.equal(breakers.pass(b), 'refused', 'a failed probe restarts the cool-down')
  clock.now += 1_000
  breakers.settle(b, true, breakers.pass(b))
  t.same([b.open, b.probing, changes], [false, false, [true, false]], 'an answered probe closes it')
  t.equal(breakers.pass(b), 'call')
})

t.test('one breaker per shard: a lost node opens its own, the state changes once for all', async (t) => {
  const { changes, breakers } = setup()
  const [a, b] = [breakers.of('10.0.0.1:7000'), breakers.of('10.0.0.2:7000')]
  for (let i = 0; i < 3; i++) breakers.settle(a, false, 'call')
  t.same([breakers.pass(a), breakers.pass(b)], ['refused', 'call'])
  for (let i = 0; i < 3; i++) breakers.settle(b, false, 'call')
  t.same(changes, [true], 'the second open breaker changes nothing outside')
  t.equal(breakers.all().length, 2)
})

t.test('stale shards: forgotten by the sweep, never by a query; the unsharded and a probing breaker stay', async (t) => {
  const { clock, changes, breakers } = setup()
  const gone = breakers.of('10.0.0.1:7000')
  const single = breakers.of('')
  for (let i = 0; i < 3; i++) { breakers.settle(gone, false, 'call'); breakers.settle(single, false, 'call') }
  clock.now += (STALE_SHARD_COOLDOWNS + 1) * 1_000 + 1
  for (let i = 0; i < 5; i++) t.equal(breakers.anyOpen(), true, 'asking changes nothing')
  t.equal(breakers.all().length, 2)
  breakers.sweepStale()
  t.same(breakers.all(), [single], 'the stale shard is forgotten; the unsharded breaker is not')
  t.same(changes, [true], 'one breaker still open')

  const probing = breakers.of('10.0.0.3:7000')
  for (let i = 0; i < 3; i++) breakers.settle(probing, false, 'call')
  clock.now += 1_000
  t.equal(breakers.pass(probing), 'probe')
  clock.now += (STALE_SHARD_COOLDOWNS + 1) * 1_000 + 1
  breakers.sweepStale()
  t.ok(breakers.all().includes(probing), 'a breaker being probed is not stale')
})

t.test('the sweep runs on a timer while a breaker is open', async (t) => {
  const { clock, changes, breakers } = setup(20)
  const gone = breakers.of('10.0.0.1:7000')
  for (let i = 0; i < 3; i++) breakers.settle(gone, false, 'call')
  clock.now += (STALE_SHARD_COOLDOWNS + 1) * 20 + 1
  await until('the stale shard swept', () => !breakers.anyOpen(), 2_000, 5)
  t.same(changes, [true, false], 'the last open breaker gone: closed')
})
