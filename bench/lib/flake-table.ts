// What the flake detector (bench/flake-detector.ts) keeps of one run of tap and how it adds runs up:
// a run's raw TAP stream read into its files (ok or not, time) and its failed checks — the
// innermost ones, as the suite's reporter names them — then, over N runs, failures per check and
// per file, as Markdown tables. Pure, so test/bench/flake-table.test.ts checks it on TAP text.
import { Parser, type Result } from 'tap-parser'

export interface FileOutcome {
  file: string
  ok: boolean
  /** Seconds, as tap timed the file; undefined when it wrote no time. */
  seconds: number | undefined
}

export interface RunOutcome {
  files: FileOutcome[]
  /** Full names (`file > subtest > check`) of the failed checks, innermost only. */
  failures: string[]
  /** Checks that passed (as tap's totals count them: a subtest's own result is not one). */
  passed: number
  failed: number
}

/** Reads one run's TAP (tap --reporter=tap): its files and failed checks. */
export async function readRun (tap: string): Promise<RunOutcome> {
  const parser = new Parser()
  const outcome: RunOutcome = { files: [], failures: [], passed: 0, failed: 0 }
  const failedInFile = new Map<string, string[]>()
  const collect = (child: Parser, into: string[]): void => {
    child.on('child', (grandchild: Parser) => collect(grandchild, into))
    child.on('assert', (result: Result) => {
      if (result.todo !== false || result.skip !== false) return
      if (!result.ok) into.push(result.fullname)
      else if (!result.closingTestPoint) outcome.passed++ // a passing subtest is not a check of its own
    })
  }
  parser.on('child', (file: Parser) => {
    const failures: string[] = []
    failedInFile.set(file.name, failures)
    collect(file, failures)
  })
  parser.on('assert', (result: Result) => {
    const inner = failedInFile.get(result.name) ?? []
    // A failed subtest is counted by the failures inside it; alone only when none is (a timeout, a throw, a crash).
    const leaves = inner.filter((name) => !inner.some((other) => other !== name && other.startsWith(`${name} > `)))
    const failures = !result.ok && leaves.length === 0 ? [result.fullname] : leaves
    outcome.failures.push(...failures)
    outcome.failed += failures.length
    outcome.files.push({ file: result.name, ok: result.ok && failures.length === 0, seconds: result.time === null ? undefined : result.time / 1000 })
  })
  const done = new Promise<void>((resolve) => parser.on('complete', () => resolve()))
  parser.end(tap)
  await done
  return outcome
}

export interface RunRecord extends RunOutcome {
  seconds: number
  /** The 1-minute load average at the run's start and end. */
  loadBefore: number
  loadAfter: number
  exitCode: number | null
}

function range (values: number[]): string {
  if (values.length === 0) return '–'
  const low = Math.min(...values)
  const high = Math.max(...values)
  return low === high ? low.toFixed(1) : `${low.toFixed(1)}–${high.toFixed(1)}`
}

/** The Markdown report of N runs: one line per run, failures per check, and per file (failed runs, time range). */
export function flakeReport (runs: RunRecord[], hog: string): string {
  const lines: string[] = [`${runs.length} runs beside ${hog}.`, '', '| run | time (s) | load (1 min) before → after | checks passed | failed | exit |', '|---|---|---|---|---|---|']
  runs.forEach((run, i) => {
    lines.push(`| ${i + 1} | ${run.seconds.toFixed(1)} | ${run.loadBefore.toFixed(1)} → ${run.loadAfter.toFixed(1)} | ${run.passed} | ${run.failed} | ${run.exitCode ?? 'killed'} |`)
  })
  const byCheck = new Map<string, number>()
  for (const run of runs) for (const name of new Set(run.failures)) byCheck.set(name, (byCheck.get(name) ?? 0) + 1)
  lines.push('')
  if (byCheck.size === 0) {
    lines.push(`No check failed in ${runs.length} runs.`)
  } else {
    lines.push('| failed check | runs failed |', '|---|---|')
    for (const [name, count] of [...byCheck].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))) lines.push(`| ${name.replaceAll('|', '\\|')} | ${count} of ${runs.length} |`)
  }
  const byFile = new Map<string, { failedRuns: number, seconds: number[] }>()
  for (const run of runs) {
    for (const file of run.files) {
      const entry = byFile.get(file.file) ?? { failedRuns: 0, seconds: [] }
      if (!file.ok) entry.failedRuns++
      if (file.seconds !== undefined) entry.seconds.push(file.seconds)
      byFile.set(file.file, entry)
    }
  }
  lines.push('', '| file | runs failed | time (s) |', '|---|---|---|')
  for (const [file, entry] of [...byFile].sort((a, b) => b[1].failedRuns - a[1].failedRuns || a[0].localeCompare(b[0]))) {
    lines.push(`| ${file} | ${entry.failedRuns} of ${runs.length} | ${range(entry.seconds)} |`)
  }
  return `${lines.join('\n')}\n`
}
