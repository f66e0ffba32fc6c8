// Schedules that reach the Redis path's timing (test/helpers/sim/timing-schedules.ts): minute windows
// sliding for minutes under consumers at 1–3 × their limits (sliding); Redis killed, with or without
// its data, while traffic goes on across the recovery barrier (recovery); a month's end or its last
// day's start crossed at month limits, and a day window sliding 24 h later (calendar); Redis's clock
// drifting and stepping (clock: a forward step checked against its stated bound); a process cut off
// or Redis gone for longer than the reserve's cover, or a process's link slower than the call budget
// (long-outage). No consumer gets more than its limit in any window, and every request is answered.
// The counts are the default run's share of the simulation budget; TEST_LONG=1 runs five times as many.
import t from 'tap'
import { runFamilies } from '../../../helpers/sim/suite.js'

await runFamilies(t, 'test/gateway/limiter/simulation/timing.test.ts', [
  { family: 'recovery', count: 60 },
  { family: 'sliding', count: 40 },
  { family: 'clock', count: 40 },
  { family: 'long-outage', count: 40 },
  { family: 'calendar', count: 40 },
  { family: 'drift-edge', count: 10 },
  { family: 'reserve-edge', count: 10 },
  { family: 'reseed-edge', count: 10 }
])
