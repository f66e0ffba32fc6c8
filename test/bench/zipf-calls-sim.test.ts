// The instrument bench/results/outage-policy-cost.md rests on: bench/zipf-calls-sim.ts counts what the limiter sends
// Redis on the Zipf workload on a virtual clock. It must give the same counts every run (that is what makes it
// load-proof), see the calls it claims to (requests, settlements, hand-backs), and show what docs/performance.md says of
// a closed loop: a gateway spending less CPU per request sends more script calls per decision for the same work.
import t from 'tap'
import { count, HERE, type Counted, type Settings } from '../../bench/zipf-calls-sim.js'
import { zipfSequence } from '../../bench/lib/zipf.js'

const order = zipfSequence({ consumers: 10_000, exponent: 1.1, length: 20_000, seed: 21 })
const settings: Settings = { seconds: 1, clients: 50, serviceMs: 0.15, backendMs: 10, netMs: 0.1 }
const perDecision = (counted: Counted): number => counted.scripts / counted.decisions

t.test('the same inputs give the same counts; less CPU per request, more script calls per decision', async (t) => {
  const first = await count(HERE, settings, order)
  t.same(await count(HERE, settings, order), first, 'deterministic')
  t.ok(first.decisions > 2_000, `decisions made: ${first.decisions}`)
  const faster = await count(HERE, { ...settings, serviceMs: 0.128 }, order)
  t.comment(`150 µs: ${perDecision(first).toFixed(4)}, 128 µs: ${perDecision(faster).toFixed(4)} script calls per decision`)
  t.ok(perDecision(faster) > perDecision(first) * 1.1, 'at least 10 % more calls per decision from 15 % less CPU per request')
})

t.test('every kind of entry is seen, and with no fault a reserve changes alone only to be handed back', async (t) => {
  const counted = await count(HERE, { ...settings, seconds: 2 }, order)
  t.comment(JSON.stringify(counted))
  t.ok(counted.scripts > 0 && counted.scripts < counted.decisions, `script calls ${counted.scripts}: fewer than decisions ${counted.decisions} (blocks, batches)`)
  t.ok(counted.entries >= counted.scripts, 'at least one entry per call')
  t.equal(counted.asking + counted.settling + counted.reserveOnly, counted.entries, 'every entry classified')
  t.ok(counted.asking > 0 && counted.settling > 0, 'entries with requests and settlements both seen')
  t.ok(counted.handBacks > 0, `idle reserves handed back after the traffic: ${counted.handBacks}`)
  t.equal(counted.reserveOnly, counted.handBacks, 'no reserve lowered by a call of its own')
})
