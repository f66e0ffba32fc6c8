// A load-sensitive check found before CI finds it: runs the suite, or the given test files, N times
// one after the other beside a CPU hog (stress-ng --cpu, or busy-looping node children where
// stress-ng is missing), and tables the failures per check and per file (bench/lib/flake-table.ts).
//   npm run test:flakes -- [--runs 5] [--hog 1] [--coverage] [--max-minutes 60] [--out FILE] [files…]
// Each run's raw TAP is kept as .tap/flakes/run-N.tap (its failures' diagnostics in full).
// Each run is `tap --reporter=tap` (coverage off unless --coverage: instrumentation slows every file
// alike and finds nothing more), read from its own TAP stream. The hog lives no longer than
// --max-minutes (its own timeout), and it and any run still going then are stopped by PID.
// Exit status: 0 when no check failed in any run, 1 otherwise.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { loadavg } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { flakeReport, readRun, type RunRecord } from './lib/flake-table.js'
import { REPO_ROOT, TAP_BIN } from './lib/processes.js'

const KEPT_DIR = join(REPO_ROOT, '.tap', 'flakes')

interface Hog {
  describe: string
  stop: () => void
}

function hasStressNg (): boolean {
  return spawnSync('stress-ng', ['--version'], { stdio: 'ignore' }).status === 0
}

/** `workers` processes that keep a core busy each, for `seconds` at most. */
function startHog (workers: number, seconds: number): Hog {
  if (workers === 0) return { describe: 'no CPU hog', stop: () => {} }
  const children: ChildProcess[] = []
  let describe: string
  if (hasStressNg()) {
    children.push(spawn('stress-ng', ['--cpu', String(workers), '--timeout', `${seconds}s`, '--quiet'], { stdio: 'ignore' }))
    describe = `a CPU hog (stress-ng --cpu ${workers})`
  } else {
    const loop = `const end = Date.now() + ${seconds * 1000}; while (Date.now() < end) {}`
    for (let i = 0; i < workers; i++) children.push(spawn(process.execPath, ['-e', loop], { stdio: 'ignore' }))
    describe = `a CPU hog (${workers} busy-looping node ${workers === 1 ? 'process' : 'processes'})`
  }
  return {
    describe,
    stop: () => { for (const child of children) if (child.exitCode === null && child.pid !== undefined) process.kill(child.pid, 'SIGTERM') }
  }
}

/** One tap run of `files` (all of the suite when none), its TAP read; killed by PID at `deadline`. */
async function runOnce (files: string[], coverage: boolean, deadline: number, keptAs: string, running: Set<ChildProcess>): Promise<RunRecord> {
  const loadBefore = loadavg()[0] ?? 0
  const started = performance.now()
  const args = ['--reporter=tap', ...(coverage ? [] : ['--disable-coverage']), ...files]
  const child = spawn(TAP_BIN, args, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, FORCE_COLOR: '0' } })
  running.add(child)
  child.once('close', () => running.delete(child))
  const chunks: Buffer[] = []
  child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk))
  const timer = setTimeout(() => { if (child.pid !== undefined) process.kill(child.pid, 'SIGTERM') }, Math.max(0, deadline - Date.now()))
  const exitCode = await new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
  clearTimeout(timer)
  const tap = Buffer.concat(chunks).toString()
  writeFileSync(keptAs, tap)
  const outcome = await readRun(tap)
  return { ...outcome, seconds: (performance.now() - started) / 1000, loadBefore, loadAfter: loadavg()[0] ?? 0, exitCode }
}

async function main (): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      runs: { type: 'string', default: '5' },
      hog: { type: 'string', default: '1' },
      coverage: { type: 'boolean', default: false },
      'max-minutes': { type: 'string', default: '60' },
      out: { type: 'string' }
    }
  })
  const runs = Number(values.runs)
  const hogWorkers = Number(values.hog)
  const maxMinutes = Number(values['max-minutes'])
  if (!Number.isInteger(runs) || runs < 1 || !Number.isInteger(hogWorkers) || hogWorkers < 0 || !(maxMinutes > 0)) {
    console.error('usage: npm run test:flakes -- [--runs N ≥ 1] [--hog N ≥ 0] [--coverage] [--max-minutes M] [--out FILE] [files…]')
    process.exit(2)
  }
  mkdirSync(KEPT_DIR, { recursive: true })
  const deadline = Date.now() + maxMinutes * 60_000
  const hog = startHog(hogWorkers, maxMinutes * 60)
  const running = new Set<ChildProcess>()
  const stopHog = (): void => { hog.stop() }
  // Interrupted: the hog and the run going on now are stopped by PID (tap stops its own test processes).
  process.once('SIGINT', () => {
    stopHog()
    for (const child of running) if (child.pid !== undefined) process.kill(child.pid, 'SIGTERM')
    process.exit(130)
  })
  const records: RunRecord[] = []
  try {
    for (let i = 0; i < runs && Date.now() < deadline; i++) {
      const record = await runOnce(positionals, values.coverage, deadline, join(KEPT_DIR, `run-${i + 1}.tap`), running)
      records.push(record)
      console.log(`run ${i + 1}/${runs}: ${record.seconds.toFixed(1)} s, ${record.passed} passed, ${record.failed} failed, load ${record.loadBefore.toFixed(1)} → ${record.loadAfter.toFixed(1)}` +
        record.failures.map((name) => `\n  ✖ ${name}`).join(''))
    }
  } finally {
    stopHog()
  }
  const target = positionals.length === 0 ? 'the whole suite' : positionals.join(', ')
  const report = `Flake detector on ${target}: ${flakeReport(records, hog.describe)}`
  console.log(`\n${report}`)
  if (values.out !== undefined) writeFileSync(values.out, report)
  process.exitCode = records.some((r) => r.failed > 0) ? 1 : 0
}

await main()
