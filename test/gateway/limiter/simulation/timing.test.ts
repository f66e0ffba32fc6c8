// Schedules that reach the Redis path's timing (test/helpers/sim/timing-schedules.ts): minute windows
// sliding for minutes under consumers at 1–3 × their limits (sliding); Redis killed, with or without
// its data, while traffic goes on across the recovery barrier (recovery); a data loss inside a busy
// process's pool second, and a re-seed cut by a second kill (reseed-edge); reserve admissions a minute
// before a burst at their seconds' edges, and a call that lowered a reserve answered late
// (reserve-edge); Redis's clock faster than the processes' at the drift bound (drift-edge); a month's
// end or its last day's start crossed at month limits, and a day window sliding 24 h later (calendar);
// a process cut off or Redis gone for longer than the reserve's cover, or a process's link slower than
// the call budget (long-outage); Redis's clock drifting and stepping (clock: a forward step checked
// against its stated bound). No consumer gets more than its limit in any window, and every request is
// answered.
// The default counts are sized by what each family catches in the mutation gate (docs/simulator.md:
// at least 3 expected failing schedules per mutant it is the gate's catch for), in the order the gate
// should try them (cheapest catches first); TEST_LONG=1 runs the nightly counts (`longCount`).
import t from 'tap'
import { runFamilies } from '../../../helpers/sim/suite.js'

await runFamilies(t, 'test/gateway/limiter/simulation/timing.test.ts', [
  { family: 'recovery', count: 40, longCount: 300 },
  { family: 'sliding', count: 20, longCount: 200 },
  { family: 'reseed-edge', count: 12, longCount: 60 },
  { family: 'reserve-edge', count: 12, longCount: 60 },
  { family: 'drift-edge', count: 5, longCount: 50 },
  { family: 'calendar', count: 20, longCount: 200 },
  { family: 'long-outage', count: 50, longCount: 200 },
  { family: 'clock', count: 10, longCount: 200 }
])
