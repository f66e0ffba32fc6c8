// npm test's reporter (test/helpers/terse-reporter.ts): a failure is found without scrolling. Fed a
// TAP stream as tap writes it, it prints one line per test file as it ends (with what failed in it),
// every failure in full at the end, and the totals as the last line — the line .ci/run reads. And
// through the real tap runner, configured by package.json, on a file with one failing check.
import { spawn } from 'node:child_process'
import { copyFileSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import t from 'tap'
import TerseReporter from '../helpers/terse-reporter.js'
import { REPO_ROOT } from '../helpers/processes.js'

async function report (tap: string): Promise<string> {
  const reporter = new TerseReporter()
  let out = ''
  reporter.on('data', (c: Buffer) => { out += c.toString() })
  const ended = new Promise((resolve) => reporter.on('end', resolve))
  reporter.end(tap)
  await ended
  return out
}

// Three files: one passes; one has a failing check nested two subtests deep; one exits with code 3
// after passing its only check (nothing inside it failed, the file did).
const TAP = `TAP version 14
# Subtest: test/a.test.ts
    # Subtest: works
        ok 1 - yes
        1..1
    ok 1 - works # time=1.5ms
    1..1
ok 1 - test/a.test.ts # time=1200.5ms

# Subtest: test/b.test.ts
    # Subtest: outer
        # Subtest: inner
            not ok 1 - arithmetic
              ---
              at:
                fileName: test/b.test.ts
                lineNumber: 7
              diff: |
                --- expected
                +++ actual
                -3
                +2
              ...
            ok 2 - still fine
            1..2
        not ok 1 - inner # time=2ms
        1..1
    not ok 1 - outer # time=3ms
    1..1
not ok 2 - test/b.test.ts # time=300ms
  ---
  exitCode: 1
  ...

# Subtest: test/c.test.ts
    ok 1 - fine
    1..1
not ok 3 - test/c.test.ts # time=40ms
  ---
  exitCode: 3
  signal: null
  ...

1..3
# { total: 5, pass: 3, fail: 2 }
# time=1650.25ms
`

t.test('one line per file, failures in full at the end (diff first), totals last', async (t) => {
  const out = await report(TAP)
  t.equal(out, `ok   test/a.test.ts  1.2 s
FAIL test/b.test.ts  0.3 s
     ✖ test/b.test.ts > outer > inner > arithmetic
FAIL test/c.test.ts  0.0 s
     ✖ test/c.test.ts

2 failures:

✖ test/b.test.ts > outer > inner > arithmetic
    diff: |
      --- expected
      +++ actual
      -3
      +2
    at:
      fileName: test/b.test.ts
      lineNumber: 7

✖ test/c.test.ts
    exitCode: 3
    signal: null

totals: 3 passed, 2 failed — 5 checks in 3 files, 1.7 s
`)
})

t.test('skips and todos are counted; a stream without totals says so', async (t) => {
  const skipped = await report('TAP version 14\n# Subtest: test/a.test.ts\n    ok 1 - later # SKIP\n    1..1\nok 1 - test/a.test.ts # time=5ms\n1..1\n# { total: 1, pass: 0, skip: 1 }\n')
  t.equal(skipped, 'ok   test/a.test.ts  0.0 s\n\ntotals: 0 passed, 0 failed, 1 skipped — 1 check in 1 file\n')
  t.equal(await report('TAP version 14\n1..0\n'), '\ntotals: unknown (tap wrote none) — 0 files\n')
})

t.test('a failure whose diag holds a function (tap writes it !function) is reported, and the totals still end the output', async (t) => {
  // As a Fastify plugin timeout reached it: its error's `fn` field is the plugin. yaml's stringify threw on it.
  const out = await report([
    'TAP version 14',
    '# Subtest: test/a.test.ts',
    '    not ok 1 - Plugin did not start in time',
    '      ---',
    '      code: AVV_ERR_PLUGIN_EXEC_TIMEOUT',
    '      fn: !function |-',
    '        "reloadPlugin"',
    '        async function reloadPlugin(app, opts) {}',
    '      ...',
    '    1..1',
    'not ok 1 - test/a.test.ts # time=10ms',
    '1..1',
    '# { total: 1, pass: 0, fail: 1 }',
    ''
  ].join('\n'))
  t.match(out, /✖ test\/a\.test\.ts > Plugin did not start in time\n {4}code: AVV_ERR_PLUGIN_EXEC_TIMEOUT\n {4}fn: "\[function [^\]]*\]"\n/)
  t.match(out, /\ntotals: 0 passed, 1 failed — 1 check in 1 file\n$/)
})

t.test('through the real tap runner, as package.json configures it: the failure at the end, totals last, exit 1', async (t) => {
  // A project of its own in a temp dir (a tap run clears its project's .tap/, coverage included: not
  // this one's), with this repository's tap settings, its node_modules, and one failing check.
  const dir = mkdtempSync(join(tmpdir(), 'terse-reporter-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const { tap } = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { tap: { reporter: string, 'node-arg'?: string[], 'test-env'?: string[] } }
  // Its files (the reporter, the preloaded TypeScript resolve hook, the test processes' first import in
  // test-env's NODE_OPTIONS) are named relative to this checkout.
  const anchored = (setting: string): string => setting.replace(/--import=(\.\.?\/\S*)/g, (_, path: string) => `--import=${pathToFileURL(resolve(REPO_ROOT, path)).href}`)
  const settings = { ...tap, reporter: resolve(REPO_ROOT, tap.reporter), 'node-arg': (tap['node-arg'] ?? []).map(anchored), 'test-env': (tap['test-env'] ?? []).map(anchored) }
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module', tap: settings }))
  symlinkSync(join(REPO_ROOT, 'node_modules'), join(dir, 'node_modules'))
  copyFileSync(join(REPO_ROOT, 'test/fixtures/reporter/one-failure.ts'), join(dir, 'one-failure.test.ts'))
  // None of this test process's TAP_* settings may leak into the child run.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(TAP|_TAPJS)/.test(k) && k !== 'NODE_OPTIONS'))
  const child = spawn(join(REPO_ROOT, 'node_modules/.bin/tap'), ['--disable-coverage', 'one-failure.test.ts'], {
    cwd: dir,
    env: { ...env, PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}` },
    stdio: ['ignore', 'pipe', 'ignore']
  })
  let out = ''
  child.stdout.on('data', (c: Buffer) => { out += c.toString() })
  const code = await new Promise((resolve) => child.once('exit', resolve))
  t.equal(code, 1)
  const lines = out.trimEnd().split('\n')
  t.match(lines[0], /^FAIL one-failure\.test\.ts {2}[\d.]+ s$/)
  t.equal(lines[1], '     ✖ one-failure.test.ts > fails on purpose > arithmetic broken on purpose')
  const failures = lines.indexOf('1 failure:')
  t.ok(failures > 1, 'the failure list follows the file lines')
  t.equal(lines[failures + 2], '✖ one-failure.test.ts > fails on purpose > arithmetic broken on purpose')
  t.same(lines.slice(failures + 3, failures + 6), ['    diff: |', '      --- expected', '      +++ actual'], 'its diff first')
  t.match(lines.at(-1), /^totals: 1 passed, 1 failed — 2 checks in 1 file, [\d.]+ s$/, 'the totals are the last line')
})
