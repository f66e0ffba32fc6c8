// The flake detector's reading of a tap run and its tables (bench/lib/flake-table.ts), on TAP text
// shaped like `tap --reporter=tap`'s: nested subtests, a file that failed without a failing check.
import t from 'tap'
import { flakeReport, readRun, type RunRecord } from '../../bench/lib/flake-table.js'

const RUN = `TAP version 14
# Subtest: test/a.test.ts
    # Subtest: holds under load
        ok 1 - an order
        not ok 2 - a count
          ---
          found: 1
          wanted: 2
          ...
        1..2
    not ok 1 - holds under load # time=12.5ms
    ok 2 - another # time=1ms
    1..2
not ok 1 - test/a.test.ts # time=1500ms
# Subtest: test/b.test.ts
    ok 1 - fine
    1..1
ok 2 - test/b.test.ts # time=250ms
# Subtest: test/c.test.ts
    1..0
not ok 3 - test/c.test.ts # time=120000ms
  ---
  signal: SIGTERM
  ...
1..3
`

t.test('a run: its files, and its failed checks innermost only (a file that failed alone is named by itself)', async (t) => {
  const run = await readRun(RUN)
  t.same(run.failures, ['test/a.test.ts > holds under load > a count', 'test/c.test.ts'])
  t.equal(run.failed, 2)
  t.equal(run.passed, 3, 'an order, another, fine: a subtest\'s own ok is not a check')
  t.same(run.files, [
    { file: 'test/a.test.ts', ok: false, seconds: 1.5 },
    { file: 'test/b.test.ts', ok: true, seconds: 0.25 },
    { file: 'test/c.test.ts', ok: false, seconds: 120 }
  ])
})

t.test('N runs: failures per check and per file, counted once per run', async (t) => {
  const failing = await readRun(RUN)
  const passing = await readRun(RUN.replace('not ok 2 - a count', 'ok 2 - a count').replace('not ok 3 - test/c.test.ts', 'ok 3 - test/c.test.ts'))
  t.same(passing.failures, ['test/a.test.ts > holds under load'], 'the subtest still said not ok: named alone')
  const record = (outcome: typeof failing, seconds: number): RunRecord => ({ ...outcome, seconds, loadBefore: 4, loadAfter: 5.5, exitCode: outcome.failed > 0 ? 1 : 0 })
  const report = flakeReport([record(failing, 30), record(failing, 31)], 'a CPU hog (stress-ng --cpu 1)')
  t.match(report, /^2 runs beside a CPU hog \(stress-ng --cpu 1\)\./)
  t.match(report, /\| 1 \| 30\.0 \| 4\.0 → 5\.5 \| 3 \| 2 \| 1 \|/)
  t.match(report, /\| test\/a\.test\.ts > holds under load > a count \| 2 of 2 \|/)
  t.match(report, /\| test\/b\.test\.ts \| 0 of 2 \| 0\.3 \|/)
  t.match(report, /\| test\/c\.test\.ts \| 2 of 2 \| 120\.0 \|/)
  const quiet = flakeReport([{ files: [], failures: [], passed: 7, failed: 0, seconds: 3, loadBefore: 1, loadAfter: 1, exitCode: 0 }], 'no CPU hog')
  t.match(quiet, /No check failed in 1 runs\./)
})
