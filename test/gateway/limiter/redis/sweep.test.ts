// The once-a-second sweep (expired pools, idle reserves, forgotten ids) visits every id a process
// knows. On a long tail that is tens of thousands: swept in one go, 10,000 ids held the event loop
// 2–16 ms every second, and every request arriving then waited (the p99 of the Zipf workload). It
// now goes SWEEP_SLICE ids per event-loop turn. Here, on the production grants with a scripted Redis
// and a turn queue run by hand: 1,200 idle ids holding reserves all hand them back, and no turn
// carries more than one slice of them.
import t from 'tap'
import { IDLE_MS } from '../../../../src/gateway/limiter/redis/calls.js'
import { createGrants, SWEEP_MS, SWEEP_SLICE } from '../../../../src/gateway/limiter/redis/grants.js'
import type { RedisPort, Runtime } from '../../../../src/gateway/limiter/redis/port.js'
import type { Ask } from '../../../../src/gateway/limiter/store.js'

const IDS = 1_200
/** Fields of one grant entry's reply (scripts.ts): ok, 1 admitted, no ban, no extra, a reserve of 10, … */
const reply = (now: number): number[] => [0, 1, 0, 0, 10, 10, 1, now + 60_000, 0, 1, now + 86_400_000, 0, 0, 0, 0, 0, 0]

t.test('the sweep reaches every id, one slice per event-loop turn', async (t) => {
  let now = Date.now()
  const turns: Array<() => void> = []
  let sweepTick: (() => void) | undefined
  let sentThisTurn: string[] = []
  const runtime: Runtime = {
    now: () => now,
    after: (ms, fn) => {
      // The sweep's timer: the first is createGrants' own; the tick's next one is left to the test.
      if (ms === SWEEP_MS) { sweepTick ??= fn; return () => {} }
      const timer = setTimeout(fn, 0)
      return () => { clearTimeout(timer) }
    },
    turnEnd: (fn) => { turns.push(fn) },
    randomId: () => 'holder'
  }
  const port: RedisPort = {
    async run (script, keys) {
      if (script.name === 'epoch') return ['mark', 0, now]
      const entries = keys.length / 2
      for (let i = 0; i < keys.length; i += 2) sentThisTurn.push(keys[i]!)
      return [now, ...Array.from({ length: entries }, () => reply(now)).flat()]
    },
    shards: () => [''],
    shardOf: () => '',
    groupOf: () => '',
    epochKey: () => 'rl:{#epoch}',
    ping: async () => {},
    watch: () => {}
  }
  /** Runs the queued turns one by one (and what they queue); the ids each one sent to Redis. */
  async function runTurns (): Promise<number[]> {
    const perTurn: number[] = []
    for (let fn = turns.shift(); fn !== undefined; fn = turns.shift()) {
      sentThisTurn = []
      fn()
      await new Promise((resolve) => setImmediate(resolve))
      perTurn.push(sentThisTurn.length)
    }
    return perTurn
  }

  const grants = createGrants({ port, runtime, holder: 'holder', policy: 'local', timeoutMs: 1_000 })
  t.teardown(() => { grants.close() })
  await grants.settled(1_000)
  const ask: Ask = { limits: { perMinute: 1_000, perDay: 100_000 }, ban: null, cost: 1, monthLimit: 0, overage: false }
  const admitted = Promise.all(Array.from({ length: IDS }, async (_, i) => await grants.consume(`c${i}`, ask)))
  await runTurns()
  t.equal((await admitted).filter((r) => r.outcome === 'ok').length, IDS, 'every id admitted once, each now holding a reserve')

  now += IDLE_MS + 1_000
  t.ok(sweepTick !== undefined, 'the sweep is scheduled')
  sweepTick?.()
  const perTurn = await runTurns()
  const sent = perTurn.reduce((a, b) => a + b, 0)
  t.comment(`ids sent to Redis per turn after the sweep: ${perTurn.filter((n) => n > 0).join(', ')}`)
  t.equal(sent, IDS, 'every idle id handed its reserve back')
  t.ok(Math.max(...perTurn) <= SWEEP_SLICE, `no turn carried more than one slice (${SWEEP_SLICE}) of them`)
  t.ok(perTurn.filter((n) => n > 0).length >= Math.ceil(IDS / SWEEP_SLICE), 'the sweep went over several turns')
})
