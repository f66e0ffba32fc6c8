// The mutation gate (`npm run sim:mutants`): does the simulator find the bugs it exists to find?
// Each mutant is one realistic bug planted in the production Redis path or its Lua — an exact text
// replacement anchored on the source, which must match exactly once (else the mutant is STALE and
// the gate fails: a code change cannot silently disable a mutant). One at a time, in a temporary
// copy of the project (src/, test/, config/ and the manifests; node_modules linked; the real src/ is
// never touched), the default simulation families of `npm test` (every
// test/gateway/limiter/simulation/*.test.ts, run as it is, fresh seeds) run against the mutant; per
// mutant the gate prints the family that caught it, how many of its schedules failed, and the time.
// A family catches a mutant when at least 1 % of its schedules fail: by default the gate stops a
// family there, and a mutant at its first catch (`--full` runs every family to the end).
//
//   npm run sim:mutants                        every mutant (CPU-heavy: minutes each on a loaded machine)
//   npm run sim:mutants -- pool-live-next-second give-back-twice      only these
//   npm run sim:mutants -- --families sliding,chaos                   only these families
//   npm run sim:mutants -- --full --markdown   every family to the end, rows for docs/simulator.md
//   npm run sim:mutants -- --control           the unmutated copy too (it must fail nowhere); `-- control`: it alone
//   npm run sim:mutants -- --counts chaos=500,burst=100 --seeds-from 7  counts per family; fixed seeds
// The mutants and the last measured table: docs/simulator.md.
import { spawn } from 'node:child_process'
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { createInterface } from 'node:readline'
import { pathToFileURL } from 'node:url'
import type { FamilyResult } from './suite.js'

export interface Mutant {
  readonly name: string
  /** The bug, as a reviewer would describe it. */
  readonly bug: string
  /** Relative to the project root. */
  readonly file: string
  readonly find: string
  readonly replace: string
}

const LIMITER = 'src/gateway/limiter'

export const MUTANTS: readonly Mutant[] = [
  {
    name: 'grant-past-room',
    bug: 'grant.lua admits one unit past the room',
    file: `${LIMITER}/lua/grant.lua`,
    find: 'if cost <= room then admitted = min(requests, floor(room / cost)) end',
    replace: 'if cost <= room + 1 then admitted = min(requests, floor((room + 1) / cost)) end'
  },
  {
    name: 'pool-live-next-second',
    bug: 'a pool unit is spendable until the end of the next second (poolLive: bucket + 1 → + 2)',
    file: `${LIMITER}/redis/pool.ts`,
    find: 'latest < (this.#bucket + 1) * MINUTE_BUCKET_MS - SPEND_MARGIN_MS',
    replace: 'latest < (this.#bucket + 2) * MINUTE_BUCKET_MS - SPEND_MARGIN_MS'
  },
  {
    name: 'write-backs-never-sent',
    bug: 'reserve admissions are never written back (dropped as if sent)',
    file: `${LIMITER}/redis/calls.ts`,
    find: 'const adjustments = [...givenBack, ...sent, ...sentAllowance]',
    replace: 'const adjustments = [...givenBack, ...sentAllowance]'
  },
  {
    name: 'barrier-wait-removed',
    bug: 'the recovery barrier is not waited out: a process grants as soon as it re-seeded',
    file: `${LIMITER}/redis/shard.ts`,
    find: 'if (wait > 0) await new Promise<void>((resolve) => runtime.after(wait, resolve))',
    replace: 'void wait'
  },
  {
    name: 'reseed-skipped',
    bug: 'the re-seed after data loss is skipped (same program as an epoch mismatch ignored)',
    file: `${LIMITER}/redis/shard.ts`,
    find: 'if (lost) await opts.reseed(shard.name)',
    replace: 'void lost'
  },
  {
    name: 'epoch-taken-before-reseed',
    bug: 'the new epoch mark is taken before the re-seed: a re-seed that fails is never run again (the next recovery takes the data as kept)',
    file: `${LIMITER}/redis/shard.ts`,
    find: 'const lost = shard.epoch !== undefined && shard.epoch !== String(value)',
    replace: 'const lost = shard.epoch !== undefined && shard.epoch !== String(value)\n      shard.epoch = String(value)'
  },
  {
    name: 'reseed-across-slots',
    bug: 'the re-seed after data loss sends a shard\'s accounts in one call, though on a Cluster their keys are in different slots (CROSSSLOT refuses it)',
    file: `${LIMITER}/redis/grants.ts`,
    find: 'const group = port.groupOf(account.key)',
    replace: 'const group = \'\''
  },
  {
    name: 'minute-ring-60-buckets',
    bug: 'off by one at a bucket end: the minute ring keeps 60 buckets, not 61 (the oldest, partly in the window, is dropped)',
    file: `${LIMITER}/lua/grant.lua`,
    find: 'local MR = { ms = 1000.0, slots = 61,',
    replace: 'local MR = { ms = 1000.0, slots = 60,'
  },
  {
    name: 'day-ring-96-buckets',
    bug: 'off by one at a day end: the day ring keeps 96 buckets of 15 min, not 97',
    file: `${LIMITER}/lua/grant.lua`,
    find: 'local DR = { ms = 900000.0, slots = 97,',
    replace: 'local DR = { ms = 900000.0, slots = 96,'
  },
  {
    name: 'month-ends-a-day-early',
    bug: 'off by one at a month end: a month is taken to end with its last day\'s start (the day counted from 1)',
    file: `${LIMITER}/lua/grant.lua`,
    find: 'local days = floor(ms / 86400000)',
    replace: 'local days = floor(ms / 86400000) + 1'
  },
  {
    name: 'month-hard-as-soft',
    bug: 'a hard month quota is treated as soft (and a soft one as hard)',
    file: `${LIMITER}/lua/grant.lua`,
    find: 'if month_on and not soft then room = min(room, month_limit - month_units - others - keep) end',
    replace: 'if month_on and soft then room = min(room, month_limit - month_units - others - keep) end'
  },
  {
    name: 'reserve-uncapped-in-flight',
    bug: 'the reserve is not capped while a call that lowers it is in flight',
    file: `${LIMITER}/redis/reserve.ts`,
    find: 'if (this.unwrittenUnits() + adjustment.delta > (this.#cap ?? this.#units)) return false',
    replace: 'if (this.unwrittenUnits() + adjustment.delta > this.#units) return false'
  },
  {
    name: 'give-back-twice',
    bug: 'a give-back is kept after it is sent, so it is applied again with every call',
    file: `${LIMITER}/redis/pool.ts`,
    find: 'this.#giveBacks = [] // a give-back is sent once',
    replace: '// a give-back is sent once'
  },
  {
    name: 'pool-kept-after-loss',
    bug: 'the pool is kept (and spent) after a data loss is found, not dropped',
    file: `${LIMITER}/redis/pool.ts`,
    find: 'this.#units = 0 // lost with the shard\'s data: never spent',
    replace: '// lost with the shard\'s data: never spent'
  },
  {
    name: 'block-in-next-second',
    bug: 'a block counted in the wrong second: the pool\'s bucket is rounded, not floored (a late-second block is spent through the next second)',
    file: `${LIMITER}/redis/pool.ts`,
    find: 'const bucket = Math.floor(redisNow / MINUTE_BUCKET_MS)',
    replace: 'const bucket = Math.round(redisNow / MINUTE_BUCKET_MS)'
  },
  {
    name: 'write-back-second-early',
    bug: 'a reserve admission is written back into the second before the one it was made in',
    file: `${LIMITER}/redis/account.ts`,
    find: 'return { minute: Math.floor(latest / MINUTE_BUCKET_MS),',
    replace: 'return { minute: Math.floor(latest / MINUTE_BUCKET_MS) - 1,'
  },
  {
    name: 'clock-no-drift-widening',
    bug: 'the clock bound is not widened for drift (DRIFT = 0)',
    file: `${LIMITER}/redis/clock.ts`,
    find: 'export const DRIFT = 0.001',
    replace: 'export const DRIFT = 0'
  },
  {
    name: 'clock-shared-by-shards',
    bug: 'one clock bound for every shard of a Cluster (the first shard\'s), though each node has its own clock',
    file: `${LIMITER}/redis/shard.ts`,
    find: 'shard = { name, clock: createShardClock(), state',
    replace: 'shard = { name, clock: shards.values().next().value?.clock ?? createShardClock(), state'
  },
  {
    name: 'reserve-cover-short',
    bug: 'the reserve is spent until 2 s before Redis drops it, not 62 s (a minute window outlives its cover)',
    file: `${LIMITER}/redis/reserve.ts`,
    find: 'export const RESERVE_COVER_MS = 62_000',
    replace: 'export const RESERVE_COVER_MS = 2_000'
  },
  {
    name: 'wait-one-bucket-short',
    bug: 'a refusal stops waiting for blocks held elsewhere a second early (waitsForBlocks: refusedIn + BLOCK_HELD_BUCKETS - 1)',
    file: `${LIMITER}/redis/calls.ts`,
    find: 'return bucket < refusedIn + BLOCK_HELD_BUCKETS',
    replace: 'return bucket < refusedIn + BLOCK_HELD_BUCKETS - 1'
  },
  {
    name: 'reserve-grows-at-any-pace',
    bug: 'grant.lua grows a reserve whatever the key\'s pace (the accounting before 30 Nov): a burst queued behind a stalled process, sent at once, is refused while the reserve is kept back and starts a ban, and the reserve goes to nobody',
    file: `${LIMITER}/lua/grant.lua`,
    find: 'if room * RESERVE_PACE_BUCKETS >= pace * RESERVE_SLACK_SECONDS then',
    replace: 'if pace >= 0 then'
  },
  {
    name: 'provisional-refusal-counted',
    bug: 'grant.lua counts a refusal that waits for blocks held elsewhere toward the ban (not spared)',
    file: `${LIMITER}/lua/grant.lua`,
    find: 'local elsewhere = (waited == 0 or minute_bucket < waited + BLOCK_HELD_BUCKETS) and held_elsewhere or 0',
    replace: 'local elsewhere = 0'
  },
  {
    name: 'spared-never-counted',
    bug: 'grant.lua does not record a refusal spared for a reserve as pending, so it is never counted toward the ban once its holder spends that room (the accounting before 29 Nov)',
    file: `${LIMITER}/lua/grant.lua`,
    find: 'if spared_now > 0 then add(bucket_at, spared_now, \'s\') end',
    replace: '-- a spared refusal is not recorded'
  },
  {
    name: 'ban-record-per-call',
    bug: 'grant.lua keeps each refusing call\'s 429s at its own millisecond, not its bucket\'s start (the record before 29 Nov: one event per refusing call, thousands under a flood at a high threshold)',
    file: `${LIMITER}/lua/grant.lua`,
    find: 'local bucket_at = fmt(\'%.0f\', floor(now / bucket_ms) * bucket_ms)',
    replace: 'local bucket_at = fmt(\'%.0f\', now)'
  },
  {
    name: 'ban-record-bucket-end',
    bug: 'grant.lua keeps a 429 at its bucket\'s end: it counts up to one bucket past the window, so a ban can start where an exact count would not',
    file: `${LIMITER}/lua/grant.lua`,
    find: 'local bucket_at = fmt(\'%.0f\', floor(now / bucket_ms) * bucket_ms)',
    replace: 'local bucket_at = fmt(\'%.0f\', (floor(now / bucket_ms) + 1) * bucket_ms)'
  },
  {
    name: 'ban-record-not-merged',
    bug: 'grant.lua writes each call\'s 429s as a new event even when its bucket already has one (the record grows with the calls, not the buckets)',
    file: `${LIMITER}/lua/grant.lua`,
    find: 'if event then event.count = event.count + count; return end',
    replace: 'if event and kind == \'s\' then event.count = event.count + count; return end'
  },
  {
    name: 'ban-window-edge-inclusive',
    bug: 'grant.lua counts a 429 whose bucket starts exactly one window ago (>= for >): one bucket too many at the edge',
    file: `${LIMITER}/lua/grant.lua`,
    find: 'if at + 0 > now - window then',
    replace: 'if at + 0 >= now - window then'
  },
  {
    name: 'memory-ban-edge-inclusive',
    bug: 'the in-process store keeps a 429 whose bucket starts exactly one window ago (ban-record.ts: < for <=)',
    file: `${LIMITER}/ban-record.ts`,
    find: 'record[expired]! <= nowMs - windowMs',
    replace: 'record[expired]! < nowMs - windowMs'
  },
  {
    name: 'refusal-not-waiting',
    bug: 'a request the outage policy cannot admit is refused at once, not parked until its shard answers again (calls.ts refuse: the `waitMs <= 0` guard\'s sign flipped, so it always holds: the behaviour before issue 38)',
    file: `${LIMITER}/redis/calls.ts`,
    find: 'if (!reserves || up(account) || waitMs <= 0) return request.reject(',
    replace: 'if (!reserves || up(account) || waitMs >= 0) return request.reject('
  },
  {
    name: 'parked-not-resumed',
    bug: 'a shard that answers again does not resume the requests parked for it (grants.ts onShardChange never calls shardUp): they wait out refusalWaitMs and are refused, 503',
    file: `${LIMITER}/redis/grants.ts`,
    find: 'if (state === \'up\') shardUp(shard) // requests that waited for it ask it now',
    replace: 'void shardUp // requests that waited for it ask it now'
  },
  {
    name: 'resumed-first-account-only',
    bug: 'shardUp resumes the parked requests of the first account only (a `return` where the loop goes on): the other accounts\' requests, their timers cancelled, are never answered',
    file: `${LIMITER}/redis/calls.ts`,
    find: '      account.requeue(requests)\n      next(account)\n',
    replace: '      account.requeue(requests)\n      return next(account)\n'
  },
  {
    name: 'resumed-wait-not-renewed',
    bug: 'a request resumed by shardUp keeps the wait it began before (calls.ts shardUp: its parkedAt not cleared), so when the call it resumed into is given up it is refused at once, 503, and the units that call\'s late reply counted for it are stranded (the code before ban-recover seeds 1356 and 1319894947)',
    file: `${LIMITER}/redis/calls.ts`,
    find: 'if (request.resumed !== true) { request.resumed = true; request.parkedAt = undefined }',
    replace: 'if (request.resumed !== true) { request.resumed = true }'
  },
  {
    name: 'late-admission-not-waited',
    bug: 'what a given-up call\'s late reply admitted asks again as a new request (calls.ts answer: refusedIn not set), so a ban begun meanwhile answers it and the units it gave back are never spent',
    file: `${LIMITER}/redis/calls.ts`,
    find: 'for (const request of group.slice(0, reply.admitted)) request.refusedIn ??= bucket',
    replace: 'for (const request of group.slice(0, 0)) request.refusedIn ??= bucket'
  }
]

const ROOT = resolve(new URL('../../..', import.meta.url).pathname)
const SIM_DIR = 'test/gateway/limiter/simulation'
/**
 * Files run in this order: the families most likely to catch a timing bug first (the gate stops at the first catch).
 * `outage-thaw` leads: the only family aimed at a refusal's wait for its shard (calls.ts refuse/shardUp), whose
 * mutants every other family passes, and the cheapest file (9 schedules, about 2 s of CPU); `ban-record` next, the
 * only family aimed at the ban's record of recent 429s, and about 3 s.
 */
const FILE_ORDER = ['outage-thaw', 'ban-record', 'timing', 'cluster', 'targeted', 'chaos', 'steady']

/** How often `find` occurs in `text`. */
function occurrences (text: string, find: string): number {
  let n = 0
  for (let i = text.indexOf(find); i >= 0; i = text.indexOf(find, i + 1)) n++
  return n
}

/** Mutants whose anchor does not match exactly once in the current source. */
export function staleMutants (root = ROOT): Array<{ mutant: Mutant, matches: number }> {
  return MUTANTS.map((mutant) => ({ mutant, matches: occurrences(readFileSync(join(root, mutant.file), 'utf8'), mutant.find) })).filter((s) => s.matches !== 1)
}

interface Options { names: string[], families: string | undefined, full: boolean, markdown: boolean, control: boolean, counts: string | undefined, seedsFrom: string | undefined, scale: string | undefined, list: boolean }

function parseArgs (argv: readonly string[]): Options {
  const o: Options = { names: [], families: undefined, full: false, markdown: false, control: false, counts: undefined, seedsFrom: undefined, scale: undefined, list: false }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === '--families') o.families = argv[++i]
    else if (arg === '--counts') o.counts = argv[++i]
    else if (arg === '--seeds-from') o.seedsFrom = argv[++i]
    else if (arg === '--scale') o.scale = argv[++i]
    else if (arg === '--full') o.full = true
    else if (arg === '--markdown') o.markdown = true
    else if (arg === '--control') o.control = true
    else if (arg === '--list') o.list = true
    else if (arg.startsWith('--')) throw new Error(`unknown option ${arg}`)
    else o.names.push(arg)
  }
  return o
}

/** A copy of the project with `mutant` applied (none: the control), in a fresh temporary directory. */
function mutatedCopy (mutant: Mutant | undefined): string {
  const dir = mkdtempSync(join(tmpdir(), `sim-mutant-${mutant?.name ?? 'control'}-`))
  for (const entry of ['src', 'test', 'config', 'package.json', 'tsconfig.json']) cpSync(join(ROOT, entry), join(dir, entry), { recursive: true })
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'))
  if (mutant !== undefined) {
    const path = join(dir, mutant.file)
    const text = readFileSync(path, 'utf8')
    if (occurrences(text, mutant.find) !== 1) throw new Error(`${mutant.name}: STALE`)
    writeFileSync(path, text.replace(mutant.find, () => mutant.replace))
  }
  return dir
}

interface Outcome { name: string, caughtBy: FamilyResult | undefined, results: FamilyResult[], seconds: number }

const caught = (r: FamilyResult): boolean => r.failed > 0 && r.failed >= r.count / 100

/** Runs one simulation file in `dir`; resolves with its families' results (stopping at a catch unless `full`). */
function runFile (dir: string, file: string, o: Options, onResult: (r: FamilyResult) => boolean): Promise<void> {
  return new Promise((resolveRun, reject) => {
    const env: NodeJS.ProcessEnv = { ...process.env, SIM_STOP_WHEN_CAUGHT: o.full ? '0' : '1' }
    if (o.families !== undefined) env.SIM_FAMILIES = o.families
    if (o.counts !== undefined) env.SIM_COUNTS = o.counts
    if (o.seedsFrom !== undefined) env.SIM_SEEDS_FROM = o.seedsFrom
    if (o.scale !== undefined) env.SIM_SCALE = o.scale
    delete env.SIM_SEED
    delete env.SIM_FAMILY
    const child = spawn(process.execPath, ['--import', pathToFileURL(join(dir, 'src', 'ts-resolve.ts')).href, join(SIM_DIR, file)], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => { stderr = (stderr + chunk.toString()).slice(-4000) })
    const lines = createInterface({ input: child.stdout })
    lines.on('line', (line) => {
      const at = line.indexOf('# sim-result ')
      if (at < 0) return
      const stop = onResult(JSON.parse(line.slice(at + '# sim-result '.length)) as FamilyResult)
      if (stop && child.exitCode === null) child.kill('SIGKILL') // tap handles SIGTERM by finishing its run
    })
    child.on('error', reject)
    child.on('close', (code, signal) => {
      if (code !== 0 && code !== 1 && signal === null) reject(new Error(`${file} exited ${code}: ${stderr}`))
      else resolveRun()
    })
  })
}

async function runMutant (mutant: Mutant | undefined, o: Options): Promise<Outcome> {
  const started = performance.now()
  const dir = mutatedCopy(mutant)
  const results: FamilyResult[] = []
  let caughtBy: FamilyResult | undefined
  try {
    const files = readdirSync(join(dir, SIM_DIR)).filter((f) => f.endsWith('.test.ts'))
    files.sort((a, b) => rank(a) - rank(b))
    for (const file of files) {
      if (caughtBy !== undefined && !o.full) break
      await runFile(dir, file, o, (r) => {
        results.push(r)
        const line = `  ${(mutant?.name ?? 'control').padEnd(28)} ${r.family.padEnd(13)} ${String(r.failed).padStart(4)} of ${String(r.run).padStart(4)} failed (count ${r.count}${r.stoppedEarly ? ', stopped at 1 %' : ''}; regression ${r.regressionFailed} of ${r.regressionRun}), ${r.seconds.toFixed(1)} s, seeds from ${r.base}`
        console.log(line)
        if (caughtBy === undefined && caught(r)) caughtBy = r
        return caughtBy !== undefined && !o.full
      })
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  return { name: mutant?.name ?? 'control', caughtBy, results, seconds: (performance.now() - started) / 1000 }
}

function rank (file: string): number {
  const i = FILE_ORDER.indexOf(file.replace(/\.test\.ts$/, ''))
  return i < 0 ? FILE_ORDER.length : i
}

function rate (r: FamilyResult): string {
  return `${r.failed} of ${r.run}${r.stoppedEarly ? ` (stopped at 1 % of ${r.count})` : ''} = ${(100 * r.failed / Math.max(1, r.run)).toFixed(1)} %`
}

async function main (): Promise<void> {
  const o = parseArgs(process.argv.slice(2))
  if (o.list) {
    for (const m of MUTANTS) console.log(`${m.name.padEnd(28)} ${m.file}: ${m.bug}`)
    return
  }
  const stale = staleMutants()
  for (const { mutant, matches } of stale) console.log(`STALE ${mutant.name}: its anchor matches ${matches} times in ${mutant.file} (must be exactly once): ${JSON.stringify(mutant.find)}`)
  // `control` as a name: the unmutated copy (alone, unless other names follow).
  if (o.names.includes('control')) o.control = true
  o.names = o.names.filter((n) => n !== 'control')
  const onlyControl = o.control && o.names.length === 0 && process.argv.includes('control')
  const unknown = o.names.filter((n) => !MUTANTS.some((m) => m.name === n))
  if (unknown.length > 0) throw new Error(`unknown mutants: ${unknown.join(', ')} (--list names them)`)
  const chosen = onlyControl ? [] : MUTANTS.filter((m) => (o.names.length === 0 || o.names.includes(m.name)) && !stale.some((s) => s.mutant === m))
  const outcomes: Outcome[] = []
  if (o.control) outcomes.push(await runMutant(undefined, o))
  for (const m of chosen) {
    console.log(`mutant ${m.name}: ${m.bug}`)
    outcomes.push(await runMutant(m, o))
  }
  console.log('\nmutant                       caught by      schedules failed                          time')
  for (const out of outcomes) {
    const by = out.caughtBy
    console.log(`${out.name.padEnd(28)} ${(by?.family ?? (out.name === 'control' ? '-' : 'NOT CAUGHT')).padEnd(14)} ${(by === undefined ? '-' : rate(by)).padEnd(41)} ${out.seconds.toFixed(0)} s`)
  }
  if (o.markdown) {
    console.log('\n| mutant | caught by | schedules failed | time |\n|---|---|---|---|')
    for (const out of outcomes) console.log(`| \`${out.name}\` | ${out.caughtBy?.family ?? '**not caught**'} | ${out.caughtBy === undefined ? out.results.map((r) => `${r.family} ${r.failed}/${r.run}`).join(', ') : rate(out.caughtBy)} | ${out.seconds.toFixed(0)} s |`)
  }
  const control = outcomes.find((x) => x.name === 'control')
  const missed = outcomes.filter((x) => x.name !== 'control' && x.caughtBy === undefined)
  const controlFailed = control !== undefined && control.results.some((r) => r.failed + r.regressionFailed > 0)
  if (stale.length > 0 || missed.length > 0 || controlFailed) {
    console.log(`\ngate FAILED: ${stale.length} stale, ${missed.length} not caught${controlFailed ? ', the unmutated control failed' : ''}`)
    process.exitCode = 1
  } else {
    console.log(`\ngate passed: ${outcomes.length - (control === undefined ? 0 : 1)} mutants, every one caught by ≥ 1 % of some family's schedules`)
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await main()
