// The test processes' compile cache (test/helpers/compile-cache-scope.ts): the packages a test process loads
// come from a cache of the tests' own, and a module of ours is still compiled with V8's block coverage — the
// counters a function read from the cache lacks. Two checks: the text V8 compiled for a module of ours ends with a
// line naming this process (what keeps the cache from serving it, seen on a cold cache too), and its `probe` has
// block counts (the probe's path and text are the same in every run: from the second run on, a cache that served
// it would leave `probe` with a function-wide count only).
import { readFileSync } from 'node:fs'
import { getCompileCacheDir } from 'node:module'
import type { Profiler, Session } from 'node:inspector'
import { Session as PromiseSession } from 'node:inspector/promises'
import t from 'tap'
import { probe } from '../fixtures/compile-cache/probe.js'

const PROBE = new URL('../fixtures/compile-cache/probe.ts', import.meta.url)

t.test('the test processes keep a compile cache of their own', async (t) => {
  const dir = getCompileCacheDir()
  t.match(dir, /petstore-gateway-compile-cache-tests/, `the cache: ${dir ?? 'none'}`)
})

const coverageOn = process.env._TAPJS_PROCESSINFO_COVERAGE_ === '1'
t.test('a module of ours is compiled with block coverage, its offsets as in the file', { skip: coverageOn ? false : 'coverage is off (tap --disable-coverage): our modules are cached then' }, async (t) => {
  t.equal(probe(true), 'taken')
  // The coverage tap's hook is taking (its inspector session: V8 keeps block counters only for the session that
  // asked). Taking it resets the counters of this process, which loses nothing: the probe is a fixture, and
  // every line of ours this file runs is counted by other files too.
  const hook = await import(new URL('../../node_modules/@tapjs/processinfo/dist/esm/register-coverage.js', import.meta.url).href) as { SESSION: Session | undefined }
  const session = hook.SESSION
  if (session === undefined) throw new Error('tap\'s coverage session is not started')
  const result = await new Promise<Profiler.ScriptCoverage[]>((resolve, reject) => {
    session.post('Profiler.takePreciseCoverage', (err, taken) => { if (err === null) resolve(taken.result); else reject(err) })
  })
  const script = result.find((s) => s.url === PROBE.href)
  const fn = script?.functions.find((f) => f.functionName === 'probe')
  t.ok(fn !== undefined, 'the probe\'s coverage is taken')
  t.equal(fn?.isBlockCoverage, true, 'with block counts')
  t.ok(fn?.ranges.some((r) => r.count === 0), 'the branch not taken counts 0')
  const text = readFileSync(PROBE, 'utf8')
  t.equal(fn?.ranges[0]?.startOffset, text.indexOf('function probe'), 'the function starts where it does in the file')

  // What V8 compiled: the module's own text (types blanked) and one line naming this process after it, so that a
  // cold cache (a fresh machine's first run) shows a missing line too, not only a warm one.
  const debug = new PromiseSession()
  debug.connect()
  try {
    const parsed: string[] = []
    debug.on('Debugger.scriptParsed', (event) => { if (event.params.url === PROBE.href) parsed.push(event.params.scriptId) })
    await debug.post('Debugger.enable')
    t.equal(parsed.length, 1, 'the probe was compiled once')
    const { scriptSource } = await debug.post('Debugger.getScriptSource', { scriptId: parsed[0] ?? '' })
    t.ok(scriptSource.endsWith(`\n// compiled in test process ${process.pid}, with coverage\n`), 'its last line names this process')
    const lengths = (lines: string[]): number[] => lines.map((line) => line.length)
    const fileLines = text.split('\n')
    t.same(lengths(scriptSource.split('\n').slice(0, fileLines.length)), lengths(fileLines), 'every line of the file where it was, as long as it was')
  } finally {
    await debug.post('Debugger.disable')
    debug.disconnect()
  }
})
