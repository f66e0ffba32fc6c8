// Runs a family of seeded schedules as a tap test: every schedule's bound is asserted (one check per
// schedule, plus the family's own), the count is printed, and a failing seed prints what happened and
// the command that replays it alone: SIM_FAMILY=<family> SIM_SEED=<seed> npx tap <file>.
// Seeds are fresh every run (a random base, printed; SIM_SEEDS_FROM=<base> replays the whole run), so
// CI explores new schedules each time; every seed that ever failed is kept in
// test/gateway/limiter/simulation/regression-seeds.json and runs first, every time.
// TEST_LONG=1 runs each family's long count (a nightly-style job); SIM_COUNT overrides the count,
// SIM_COUNTS=family=n,… one family's, SIM_SCALE a fraction of each; SIM_FAMILIES=a,b runs only those.
// Each family ends with a `# sim-result {json}` line: the mutation gate (mutants.ts) reads it.
// A family with a world of its own (not runSchedule's: outage-thaw) passes `schedule`, which runs one seed
// and returns its outcome, and gets the same seeds, counts, regression seeds and result line.
import { randomInt } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { Test } from 'tap'
import { createLuaVm, type LuaVm } from './redis-model.js'
import { runSchedule, type Report } from './run.js'
import type { Family } from './schedules.js'

/** What runFamilies asserts of every schedule, beside a family's own checks. */
export interface ScheduleOutcome {
  /** Rolling windows over their limit (empty: none). */
  readonly violations: readonly unknown[]
  readonly unanswered: number
  readonly requests: number
  readonly admitted: number
  /** What happened, printed for a failing (or replayed) seed. */
  describe: () => string
}

interface FamilyCounts {
  /** Schedules of the default run (ignored when SIM_SEED replays one, or SIM_COUNT is set). */
  count: number
  /** Schedules under TEST_LONG=1 (default: 5 × count). */
  longCount?: number
}

/** A family of the simulator's schedules (runSchedule). */
export interface FamilyRun extends FamilyCounts {
  family: Family
  schedule?: undefined
  /** Extra checks of one schedule, beside the bound and every request answered. */
  check?: (t: Test, report: Report) => void
}

/** A family with a world of its own: `schedule` runs one seed. */
export interface OwnFamilyRun<R extends ScheduleOutcome> extends FamilyCounts {
  family: string
  schedule: (seed: number, vm: LuaVm) => Promise<R>
  /** Extra checks of one schedule, beside the bound and every request answered. */
  check?: (t: Test, report: R) => void
}

/** A seed that failed once, kept so it runs every time (`family`: a simulator family or one with its own world). */
export interface RegressionSeed { readonly family: string, readonly seed: number, readonly found: string }

const REGRESSION_FILE = new URL('../../gateway/limiter/simulation/regression-seeds.json', import.meta.url)

export function regressionSeeds (): RegressionSeed[] {
  return (JSON.parse(readFileSync(REGRESSION_FILE, 'utf8')) as { seeds: RegressionSeed[] }).seeds
}

/** What one family's run found, printed as `# sim-result {json}` for the mutation gate. */
export interface FamilyResult { family: string, base: number, run: number, count: number, failed: number, regressionRun: number, regressionFailed: number, seconds: number, cpuSeconds: number, stoppedEarly: boolean }

/** SIM_COUNTS=family=n,…: counts per family (the mutation gate's `--counts`). */
function countsByFamily (): Map<string, number> {
  return new Map((process.env.SIM_COUNTS ?? '').split(',').filter((x) => x.includes('=')).map((x) => [x.split('=')[0]!, Number(x.split('=')[1])]))
}

function countOf (run: FamilyCounts & { family: string }): number {
  const own = countsByFamily().get(run.family)
  if (own !== undefined) return own
  if (process.env.SIM_COUNT !== undefined) return Number(process.env.SIM_COUNT)
  if (process.env.TEST_LONG === '1') return run.longCount ?? run.count * 5
  if (process.env.SIM_SCALE !== undefined) return Math.max(1, Math.ceil(run.count * Number(process.env.SIM_SCALE)))
  return run.count
}

/** Families this run keeps: SIM_FAMILY (one) or SIM_FAMILIES (a comma list); all when neither is set. */
function selected (family: string): boolean {
  const list = process.env.SIM_FAMILIES ?? process.env.SIM_FAMILY
  return list === undefined || list === '' || list.split(',').includes(family)
}

/** Runs one schedule of `run` and its family's checks: the outcome, and each check that failed. */
async function runOne<R extends ScheduleOutcome> (run: FamilyRun | OwnFamilyRun<R>, seed: number, vm: LuaVm): Promise<{ report: ScheduleOutcome, extra: string[] }> {
  const extra: string[] = []
  const sub = { ok: (v: unknown, m: string) => { if (v !== true) extra.push(m) } } as unknown as Test
  if (run.schedule === undefined) {
    const report = await runSchedule(run.family, seed, vm)
    run.check?.(sub, report)
    return { report, extra }
  }
  const report = await run.schedule(seed, vm)
  run.check?.(sub, report)
  return { report, extra }
}

export async function runFamilies<R extends ScheduleOutcome> (t: Test, file: string, runs: ReadonlyArray<FamilyRun | OwnFamilyRun<R>>): Promise<void> {
  // Thousands of schedules take a minute or two on a quiet machine, several on a loaded one.
  t.setTimeout(1_800_000)
  const vm = await createLuaVm()
  const only = process.env.SIM_SEED === undefined ? undefined : Number(process.env.SIM_SEED)
  // The gate stops a family once it has failed on 1 % of its count (the gate's target): enough to call it caught.
  const stopWhenCaught = process.env.SIM_STOP_WHEN_CAUGHT === '1'
  const kept = only === undefined && process.env.SIM_REGRESSION !== '0' ? regressionSeeds() : []
  let total = 0
  const started = performance.now()
  for (const run of runs) {
    if (!selected(run.family)) continue
    const count = countOf(run)
    const base = only ?? (process.env.SIM_SEEDS_FROM !== undefined ? Number(process.env.SIM_SEEDS_FROM) : randomInt(1, 2 ** 31 - count))
    const regression = kept.filter((k) => k.family === run.family).map((k) => k.seed)
    const fresh = only === undefined ? Array.from({ length: count }, (_, i) => base + i) : [only]
    const familyStarted = performance.now()
    const cpuStarted = process.cpuUsage()
    if (only === undefined) t.comment(`${run.family}: ${regression.length} regression seeds, then ${count} fresh seeds ${base}…${base + count - 1} (SIM_FAMILY=${run.family} SIM_SEEDS_FROM=${base} replays this run)`)
    const result: FamilyResult = { family: run.family, base, run: 0, count, failed: 0, regressionRun: 0, regressionFailed: 0, seconds: 0, cpuSeconds: 0, stoppedEarly: false }
    let admitted = 0
    let requests = 0
    const enough = Math.max(1, Math.ceil(count / 100))
    for (const [seed, isRegression] of [...regression.map((s) => [s, true] as const), ...fresh.map((s) => [s, false] as const)]) {
      if (stopWhenCaught && result.failed >= enough) { result.stoppedEarly = true; break }
      const { report, extra } = await runOne(run, seed, vm)
      total++
      if (isRegression) result.regressionRun++
      else result.run++
      admitted += report.admitted
      requests += report.requests
      const bad = report.violations.length > 0 || report.unanswered > 0 || extra.length > 0
      if (bad) {
        if (isRegression) result.regressionFailed++
        else result.failed++
        t.comment(`${report.describe()}\n${extra.join('\n')}\nreplay: SIM_FAMILY=${run.family} SIM_SEED=${seed} npx tap --disable-coverage ${file}${isRegression ? '' : '\n(a fresh seed: add it to test/gateway/limiter/simulation/regression-seeds.json)'}`)
      } else if (only !== undefined) {
        t.comment(report.describe())
      }
      if (bad || only !== undefined) {
        t.same(report.violations, [], `${run.family} seed ${seed}: no window over its limit`)
        t.equal(report.unanswered, 0, `${run.family} seed ${seed}: every request answered`)
        t.same(extra, [], `${run.family} seed ${seed}: the family's checks hold`)
      }
    }
    result.seconds = (performance.now() - familyStarted) / 1000
    const cpu = process.cpuUsage(cpuStarted)
    result.cpuSeconds = (cpu.user + cpu.system) / 1e6
    t.comment(`sim-result ${JSON.stringify(result)}`)
    const failed = result.failed + result.regressionFailed
    t.equal(failed, 0, `${run.family}: ${result.regressionRun} regression and ${result.run} fresh schedules (seeds ${base}…${base + result.run - 1}), ${requests} requests, ${admitted} admitted, 0 over any limit`)
  }
  t.comment(`simulated ${total} schedules in ${((performance.now() - started) / 1000).toFixed(1)} s`)
}
