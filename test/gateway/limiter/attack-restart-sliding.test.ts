// Exact through faults, two scenarios on one redis-server, backend and pair of gateway processes
// (startAttackRig), each on its own consumer: the four processes start once for the file, not once a
// scenario (test/helpers/attack.ts).
// 1. Kill and restart: redis-server killed under the attack load and restarted empty (no persistence),
//    twice. The processes see their connections drop, answer from their pools and reserves meanwhile,
//    find the epoch mark gone when Redis is back, re-seed what they admitted (each bucket where it was
//    counted) and wait out the recovery barrier before granting there again. It runs first, on
//    processes and a Redis nothing else has used: what it had on a rig of its own.
// 2. The sliding steady state, without a minute of real time: the second consumer's hash is seeded
//    with 10 admissions in each of the 60 seconds before its run, so every second boundary frees 10
//    that the boundary's burst races for; Redis frozen for 150 ms just before and just after
//    boundaries, where the processes' pools and reserves meet a frozen Redis. Nothing of the first
//    run is in its windows, pools, blocks or reserves.
// Each: the most admissions in any rolling minute (the seeded ones counted at the end of their second)
// stays the limit.
import t from 'tap'
import { ATTACK_LIMIT, assertWithinLimit, attackConsumerId, startAttackRig, suiteScenario } from '../../helpers/attack.js'
import { FIELD } from '../../../src/gateway/limiter/redis/layout.js'

// Two scenarios of 11–16 s: twice one file's share of tap's timeout, for a loaded machine.
t.setTimeout(600_000)
const rig = await startAttackRig(t, {}, 2)

t.test('kill and restart without persistence: never more than the limit in a rolling minute', async (t) => {
  const scenario = suiteScenario('kill and restart')
  const run = await rig.run(scenario, 0)
  assertWithinLimit(t, run, scenario)
  t.ok(run.most >= ATTACK_LIMIT - 6, `and the limit is reached: ${run.most} (at least ${ATTACK_LIMIT - 6})`)
  const counted = Number(await run.redis.cli('HGET', `rl:{${attackConsumerId(0)}}`, FIELD.minuteUnits))
  t.ok(counted >= run.most, `the restarted Redis was re-seeded: it counts ${counted} in the consumer's window`)
})

t.test('sliding window, pauses at boundaries: never more than the limit in a rolling minute', async (t) => {
  const scenario = suiteScenario('sliding window, 150 ms pauses at boundaries')
  const run = await rig.run(scenario, 1)
  assertWithinLimit(t, run, scenario)
  const admitted = run.answers.filter((a) => a.status === 200).length
  // Each boundary frees the 10 seeded a minute before it; at least 60 % of what was freed is used (120 in the 20 s of TEST_LONG).
  const freed = (scenario.history ?? 0) * scenario.durationMs / 1000
  t.ok(admitted >= 0.6 * freed, `the freed room was used: ${admitted} admitted in ${scenario.durationMs / 1000} s, the seeded minute freeing ${scenario.history ?? 0} a second (at least ${0.6 * freed})`)
})
