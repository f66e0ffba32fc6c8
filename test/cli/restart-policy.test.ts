// The launcher's restart arithmetic, on an injected clock: delays double from the first and stop at
// the cap; crashes older than the window are forgotten; the N-th crash within the window gives up.
import t from 'tap'
import { CrashHistory, DEFAULT_RESTART_POLICY } from '../../src/cli/restart-policy.js'

t.test('the defaults: 250 ms, doubling, and the fifth crash within a minute is a loop', async (t) => {
  const history = new CrashHistory()
  t.same([0, 1, 2, 3, 4].map((i) => history.record(1_000 * i)), [
    { restart: true, delayMs: 250, recentCrashes: 1 },
    { restart: true, delayMs: 500, recentCrashes: 2 },
    { restart: true, delayMs: 1000, recentCrashes: 3 },
    { restart: true, delayMs: 2000, recentCrashes: 4 },
    { restart: false, recentCrashes: 5 }
  ])
  t.same(DEFAULT_RESTART_POLICY, { firstDelayMs: 250, maxDelayMs: 5000, crashLoopCrashes: 5, crashLoopWindowMs: 60_000 })
})

t.test('delays stop growing at the cap', async (t) => {
  const history = new CrashHistory({ firstDelayMs: 100, maxDelayMs: 300, crashLoopCrashes: 10, crashLoopWindowMs: 60_000 })
  t.same([0, 1, 2, 3, 4].map((i) => history.record(i)).map((d) => d.restart ? d.delayMs : -1), [100, 200, 300, 300, 300])
})

t.test('crashes older than the window are forgotten: occasional crashes are restarted forever, quickly', async (t) => {
  const history = new CrashHistory({ firstDelayMs: 100, maxDelayMs: 1000, crashLoopCrashes: 3, crashLoopWindowMs: 10_000 })
  for (let i = 0; i < 20; i++) t.same(history.record(i * 10_000), { restart: true, delayMs: 100, recentCrashes: 1 }, `crash ${i + 1}, 10 s after the last`)
  // The last of those was at 190 s.
  t.same(history.record(195_000), { restart: true, delayMs: 200, recentCrashes: 2 }, 'the previous crash is 5 s old: in the window')
  t.same(history.record(199_999), { restart: false, recentCrashes: 3 }, 'the third within 10 s (the first 9.999 s old): a loop')
})
