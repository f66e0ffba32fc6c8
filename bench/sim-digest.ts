// Proves a change to the simulator's speed left what it simulates alone: runs each simulator test file on
// fixed seeds in this checkout and in another (SIM_DIGEST_BASE, e.g. a detached copy of main), one after the
// other, each with bench/sim-digest-hook.ts preloaded, and compares (1) the hook's digest of every event
// scheduled and run (its instant, its order) and every script Redis ran (keys, arguments, Redis time, reply),
// and (2) the file's own TAP output with its wall-clock figures taken out (each family's requests, admitted,
// failures; every per-schedule line it prints). Prints a row per file: same or not, and the CPU each side took
// (user + sys of the file's process, without tap's runner). Exits 1 when any file differs.
//   git worktree add --detach /tmp/main-copy main && cp -al node_modules /tmp/main-copy/node_modules
//   SIM_DIGEST_BASE=/tmp/main-copy node --import ./src/ts-resolve.ts bench/sim-digest.ts [file …]
//   SIM_SEEDS_FROM (default 424242), SIM_COUNT (default: each file's own counts), SIM_DIGEST_KEEP=dir keeps each output
import { spawnSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'

const HERE = resolve(import.meta.dirname, '..')
const HOOK = join(HERE, 'bench/sim-digest-hook.ts')

/** Every test file that drives the simulator (test/helpers/sim/). */
const FILES = [
  'test/gateway/limiter/simulation/timing.test.ts',
  'test/gateway/limiter/simulation/burst-stalled-holders.test.ts',
  'test/gateway/limiter/simulation/cluster.test.ts',
  'test/gateway/limiter/simulation/burst-ban.test.ts',
  'test/gateway/limiter/simulation/reserve-under-load.test.ts',
  'test/gateway/limiter/simulation/reserve-after-stall.test.ts',
  'test/gateway/limiter/simulation/targeted.test.ts',
  'test/gateway/limiter/simulation/steady.test.ts',
  'test/bench/zipf-calls-sim.test.ts',
  'test/gateway/limiter/simulation/outage-tail.test.ts',
  'test/gateway/limiter/simulation/chaos.test.ts',
  'test/gateway/limiter/simulation/burst-late-give-back.test.ts',
  'test/gateway/limiter/simulation/check-forgotten.test.ts',
  'test/gateway/limiter/lua/month.test.ts'
]
// Not here: test/gateway/limiter/redis/sim-model.test.ts runs the model at the instants a real redis-server
// reported (wall-clock time: its digest differs run to run); it holds the model to the real server's replies.

interface Outcome { digest: string, tap: string, cpu: number, status: number | null }

/** One file in one checkout: its digest line, its TAP output without wall-clock figures, its CPU seconds. */
function runIn (root: string, file: string): Outcome {
  // No tap timeout: the base side under load (and the hook's hashing) may take longer than tap's 30 s default.
  const env = { ...process.env, SIM_DIGEST_ROOT: root, SIM_SEEDS_FROM: process.env.SIM_SEEDS_FROM ?? '424242', TAP_TIMEOUT: '0' }
  const run = spawnSync('/usr/bin/time', ['-f', '%U %S', process.execPath, `--import=${join(root, 'src/ts-resolve.ts')}`, `--import=${HOOK}`, join(root, file)], { cwd: root, env, encoding: 'utf8', maxBuffer: 1 << 28 })
  const lines = run.stdout.split('\n')
  const digest = lines.find((line) => line.startsWith('# sim-digest ')) ?? '(none)'
  const tap = lines.filter((line) => !line.startsWith('# sim-digest ')).map(normalize).join('\n')
  const times = run.stderr.trim().split('\n').at(-1)!.split(' ').map(Number)
  return { digest, tap, cpu: times[0]! + times[1]!, status: run.status }
}

/** A TAP line without what the wall clock moves: durations, CPU seconds. */
function normalize (line: string): string {
  if (line.includes('# sim-result ')) {
    const result = JSON.parse(line.slice(line.indexOf('{'))) as Record<string, unknown>
    delete result.seconds
    delete result.cpuSeconds
    return `${line.slice(0, line.indexOf('{'))}${JSON.stringify(result)}`
  }
  return line
    .replace(/time=[\d.]+m?s/g, 'time=…')
    .replace(/in [\d.]+ s\b/g, 'in … s')
    .replace(/[\d.]+ ms of CPU/g, '… ms of CPU')
}

const base = process.env.SIM_DIGEST_BASE
const files = process.argv.length > 2 ? process.argv.slice(2) : FILES
const keep = process.env.SIM_DIGEST_KEEP
if (keep !== undefined) mkdirSync(keep, { recursive: true })
let differ = 0
console.log(`seeds from ${process.env.SIM_SEEDS_FROM ?? '424242'}${process.env.SIM_COUNT === undefined ? '' : `, SIM_COUNT=${process.env.SIM_COUNT}`}; base ${base ?? '(none)'}`)
console.log('| file | same | digest (this checkout) | CPU base → this (s) |')
console.log('|---|---|---|---|')
for (const file of files) {
  const here = runIn(HERE, file)
  const there = base === undefined ? undefined : runIn(resolve(base), file)
  if (keep !== undefined) {
    const name = file.replaceAll('/', '_')
    writeFileSync(join(keep, `${name}.this`), `${here.digest}\n${here.tap}`)
    if (there !== undefined) writeFileSync(join(keep, `${name}.base`), `${there.digest}\n${there.tap}`)
  }
  const same = there === undefined ? '—' : there.digest === here.digest && there.tap === here.tap ? 'yes' : there.digest === here.digest ? 'output differs' : 'NO'
  if (same !== 'yes' && same !== '—') differ++
  if (here.status !== 0 || (there !== undefined && there.status !== 0)) differ++
  console.log(`| ${file} | ${same}${here.status === 0 ? '' : ` (exit ${here.status})`} | ${here.digest.replace('# sim-digest ', '')} | ${there === undefined ? '' : `${there.cpu.toFixed(1)} → `}${here.cpu.toFixed(1)} |`)
}
process.exit(differ === 0 ? 0 : 1)
