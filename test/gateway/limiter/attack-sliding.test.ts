// Exact through faults in the sliding steady state, without a minute of real time: Redis is seeded
// with 10 admissions in each of the 60 seconds before the run, so every second boundary frees 10
// that the boundary's burst races for; Redis frozen for 150 ms just before and just after
// boundaries, where the processes' pools and reserves meet a frozen Redis. The most admissions in any rolling
// minute, the seeded ones counted at the end of their second, stays the limit (test/helpers/attack.ts).
import t from 'tap'
import { assertWithinLimit, attack, suiteScenario } from '../../helpers/attack.js'

t.test('sliding window, pauses at boundaries: never more than the limit in a rolling minute', async (t) => {
  const scenario = suiteScenario('sliding window, 150 ms pauses at boundaries')
  const run = await attack(t, scenario)
  assertWithinLimit(t, run, scenario)
  const admitted = run.answers.filter((a) => a.status === 200).length
  // Each boundary frees the 10 seeded a minute before it; at least 60 % of what was freed is used (120 in the 20 s of TEST_LONG).
  const freed = (scenario.history ?? 0) * scenario.durationMs / 1000
  t.ok(admitted >= 0.6 * freed, `the freed room was used: ${admitted} admitted in ${scenario.durationMs / 1000} s, the seeded minute freeing ${scenario.history ?? 0} a second (at least ${0.6 * freed})`)
})
