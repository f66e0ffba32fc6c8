// Runs a family of seeded schedules as a tap test: every schedule's bound is asserted (one check per
// schedule, plus the family's own), the count is printed, and a failing seed prints what happened and
// the command that replays it alone: SIM_FAMILY=<family> SIM_SEED=<seed> npx tap <file>.
// SIM_SEEDS_FROM moves the seed range (to explore schedules CI has not run).
import type { Test } from 'tap'
import { createLuaVm } from './redis-model.js'
import { runSchedule, type Report } from './run.js'
import type { Family } from './schedules.js'

export interface FamilyRun {
  family: Family
  /** Schedules to run (ignored when SIM_SEED replays one). */
  count: number
  /** Extra checks of one schedule, beside the bound and every request answered. */
  check?: (t: Test, report: Report) => void
}

export async function runFamilies (t: Test, file: string, runs: readonly FamilyRun[]): Promise<void> {
  // Thousands of schedules take a minute or two on a quiet machine, several on a loaded one.
  t.setTimeout(900_000)
  const vm = await createLuaVm()
  const only = process.env.SIM_SEED === undefined ? undefined : Number(process.env.SIM_SEED)
  const from = Number(process.env.SIM_SEEDS_FROM ?? 1)
  let total = 0
  const started = performance.now()
  for (const run of runs) {
    if (process.env.SIM_FAMILY !== undefined && process.env.SIM_FAMILY !== run.family) continue
    const seeds = only === undefined ? Array.from({ length: run.count }, (_, i) => from + i) : [only]
    let failed = 0
    let admitted = 0
    let requests = 0
    for (const seed of seeds) {
      const report = await runSchedule(run.family, seed, vm)
      total++
      admitted += report.admitted
      requests += report.requests
      const extra: string[] = []
      const sub = { ok: (v: unknown, m: string) => { if (v !== true) extra.push(m) } } as unknown as Test
      run.check?.(sub, report)
      const bad = report.violations.length > 0 || report.unanswered > 0 || extra.length > 0
      if (bad) {
        failed++
        t.comment(`${report.describe()}\n${extra.join('\n')}\nreplay: SIM_FAMILY=${run.family} SIM_SEED=${seed} npx tap --disable-coverage ${file}`)
      } else if (only !== undefined) {
        t.comment(report.describe())
      }
      if (bad || only !== undefined) {
        t.same(report.violations, [], `${run.family} seed ${seed}: no window over its limit`)
        t.equal(report.unanswered, 0, `${run.family} seed ${seed}: every request answered`)
        t.same(extra, [], `${run.family} seed ${seed}: the family's checks hold`)
      }
    }
    t.equal(failed, 0, `${run.family}: ${seeds.length} schedules (seeds ${seeds[0]}…${seeds[seeds.length - 1]}), ${requests} requests, ${admitted} admitted, 0 over any limit`)
  }
  t.comment(`simulated ${total} schedules in ${((performance.now() - started) / 1000).toFixed(1)} s`)
}
