// A child process that never answers is reported with what it was doing (test/helpers/child-diagnosis.ts):
// one stuck with its event loop turning shows its open handles, one stuck in JavaScript shows a running
// thread and no report, one that exits at start shows its exit and output.
import t from 'tap'
import { freePort } from '../helpers/ports.js'
import { runEntry, waitForProcessHttp } from '../helpers/processes.js'

t.test('an event loop that turns but never serves: its threads and its open handles', async (t) => {
  const port = await freePort()
  const dir = t.testdir({
    // Listens on `port` (not HTTP: every request is dropped) and keeps a timer: what a process stuck waiting looks like.
    'quiet.mjs': `import { createServer } from 'node:net'\ncreateServer((s) => s.destroy()).listen(${port}, '127.0.0.1')\nsetInterval(() => {}, 1000)\nconsole.log('started')\n`
  })
  const proc = runEntry(t, 'quiet.mjs', {}, dir)
  const error = await waitForProcessHttp(proc, `http://127.0.0.1:${port}/`, () => true, 1_500).then(() => undefined, (err: Error) => err)
  t.ok(error instanceof Error, 'the wait fails')
  const message = error?.message ?? ''
  t.match(message, /not within 1500 ms/, 'it says how long it waited')
  t.match(message, /fetch failed ← .*(ECONNRESET|UND_ERR_SOCKET|other side closed)/, 'and why each try failed: the cause, not only "fetch failed"')
  t.match(message, /its output: started/, 'with the child\'s output')
  t.match(message, new RegExp(`threads of ${proc.child.pid ?? 0}:\\n {2}\\d+ \\S+: state [RS]`), 'each thread\'s state')
  t.match(message, /active libuv handles \(\d+\):/, 'the diagnostic report was written and read')
  t.match(message, new RegExp(`tcp \\{[^}]*"port":${port}\\}`), 'it names the listening socket')
  t.match(message, /\n {2}timer /, 'and the timer')
})

t.test('a process stuck in JavaScript: a running thread, and no report (its event loop never turns)', async (t) => {
  const port = await freePort()
  const dir = t.testdir({ 'spin.mjs': 'console.log(\'spinning\')\nfor (;;) {}\n' })
  const proc = runEntry(t, 'spin.mjs', {}, dir)
  const error = await waitForProcessHttp(proc, `http://127.0.0.1:${port}/`, () => true, 1_500).then(() => undefined, (err: Error) => err)
  const message = error?.message ?? ''
  t.match(message, /ECONNREFUSED/, 'nothing listens: refused')
  t.match(message, /no diagnostic report within 5000 ms: its event loop does not turn/, 'no report')
})

t.test('a process that exits at start: the exit and its output, at once', async (t) => {
  const port = await freePort()
  const dir = t.testdir({ 'fail.mjs': 'console.error(\'cannot start\')\nprocess.exit(3)\n' })
  const started = Date.now()
  const proc = runEntry(t, 'fail.mjs', {}, dir)
  const error = await waitForProcessHttp(proc, `http://127.0.0.1:${port}/`).then(() => undefined, (err: Error) => err)
  t.match(error?.message ?? '', /^exited \(code 3, signal null\); its output: cannot start\n\s*it is not running$/, 'it names the exit code and output')
  t.ok(Date.now() - started < 60_000, `seen before the start timeout (${Date.now() - started} ms)`)
})
