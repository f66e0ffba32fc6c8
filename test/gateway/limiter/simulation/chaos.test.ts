// The Redis path under every fault at once, in the deterministic simulator (test/helpers/sim): two
// or three processes, one to four consumers with small minute, day and month limits, costs above 1,
// bursts on second boundaries, and Redis pauses, kills with and without its data, link resets,
// stalled and crashed processes, slow and reordered replies. No consumer gets more than its limit
// in any rolling minute, rolling day or calendar month, and no request is left unanswered.
import t from 'tap'
import { runFamilies } from '../../../helpers/sim/suite.js'

// 700 schedules by default (1,500, then 1,000, before the timing and cluster families took a share of the budget: docs/simulator.md).
await runFamilies(t, 'test/gateway/limiter/simulation/chaos.test.ts', [{ family: 'chaos', count: 700 }])
