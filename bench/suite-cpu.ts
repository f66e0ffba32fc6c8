// Where a suite's CPU goes, per test file: runs `tap` (the whole suite, or the given files) under the
// kernel's process accounting and puts every process that ended on the test file whose process tree
// it belonged to (bench/lib/process-accounting.ts) — the file's own process, the redis-servers,
// gateways, backends and CLIs it started, their children. tap's per-file times say how long a file
// held a slot; this says what it cost the machine, which is what two suites side by side share.
//   npm run test:cpu -- [--top 40] [--out FILE] [--no-coverage] [files…]
// Needs root and `accton` (Debian: apt-get install acct). Process accounting is machine-wide while it
// runs: run nothing else meanwhile, or its processes count under "(outside)". Which pid ran which file
// is read from /proc every 200 ms: a test process lives far longer than that.
import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative, resolve as resolvePath } from 'node:path'
import { parseArgs } from 'node:util'
import { cpuPerFile, parseAccounting, type FileCpu } from './lib/process-accounting.js'
import { REPO_ROOT, TAP_BIN } from './lib/processes.js'

const TEST_FILE = /\.test\.ts$/
const TAP_RUNNER = /(^tap(\s|$)|\/\.bin\/tap$|@tapjs\/run\/)/

async function run (command: string, args: readonly string[], output: 'inherit' | 'ignore' = 'inherit'): Promise<number> {
  const child = spawn(command, args, { cwd: REPO_ROOT, stdio: ['ignore', output, 'inherit'] })
  return await new Promise<number>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (code) => resolve(code ?? 1))
  })
}

/**
 * The test file each running process was started on: tap starts `node [its imports] FILE`, the file last
 * and alone (the runner, given files to run, names them too: it is told apart by its title, `tap …` in one string, or its script).
 */
function sampleTestProcesses (into: Map<number, string>): void {
  for (const name of readdirSync('/proc')) {
    const pid = Number(name)
    if (!Number.isInteger(pid) || into.has(pid) || pid === process.pid || pid === process.ppid) continue // this script and npm name the files too
    try {
      const args = readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').filter((arg) => arg !== '')
      const last = args.at(-1) ?? ''
      if (TEST_FILE.test(last) && args.filter((arg) => TEST_FILE.test(arg)).length === 1 && !args.some((arg) => TAP_RUNNER.test(arg))) into.set(pid, relative(REPO_ROOT, resolvePath(REPO_ROOT, last)))
    } catch { /* it ended meanwhile */ }
  }
}

function table (files: readonly FileCpu[], top: number): string {
  const total = files.reduce((sum, entry) => sum + entry.cpuSeconds, 0)
  const tests = files.filter((entry) => entry.file !== '(outside)')
  const lines = [
    `${total.toFixed(1)} s of CPU in ${files.reduce((sum, entry) => sum + entry.processes, 0)} processes; ${tests.length} test files ` +
      `(${tests.reduce((sum, entry) => sum + entry.cpuSeconds, 0).toFixed(1)} s), outside them ${(total - tests.reduce((sum, entry) => sum + entry.cpuSeconds, 0)).toFixed(1)} s`,
    '',
    '| CPU s | processes | file | by command |',
    '|---:|---:|---|---|'
  ]
  for (const entry of files.slice(0, top)) {
    const commands = entry.byCommand.slice(0, 4).map(([command, seconds]) => `${command} ${seconds.toFixed(1)}`).join(', ')
    lines.push(`| ${entry.cpuSeconds.toFixed(1)} | ${entry.processes} | \`${entry.file}\` | ${commands} |`)
  }
  return lines.join('\n')
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { top: { type: 'string', default: '40' }, out: { type: 'string' }, 'no-coverage': { type: 'boolean', default: false } }
})
if (process.getuid?.() !== 0) throw new Error('process accounting needs root')
const dir = mkdtempSync(join(tmpdir(), 'suite-cpu-'))
const accountingFile = join(dir, 'pacct')
writeFileSync(accountingFile, '')
if (await run('accton', [accountingFile], 'ignore') !== 0) throw new Error('accton failed: is the acct package installed (apt-get install acct)?')
const fileOfPid = new Map<number, string>()
const sampler = setInterval(() => { sampleTestProcesses(fileOfPid) }, 200)
let status: number
try {
  status = await run(TAP_BIN, [...(values['no-coverage'] ? ['--disable-coverage'] : []), ...positionals])
} finally {
  clearInterval(sampler)
  await run('accton', ['off'], 'ignore')
}
const report = table(cpuPerFile(parseAccounting(readFileSync(accountingFile)), fileOfPid), Number(values.top))
rmSync(dir, { recursive: true, force: true })
console.log(`\n${report}`)
if (values.out !== undefined) writeFileSync(values.out, `${report}\n`)
process.exitCode = status
