// The supervisor of one launcher child, with real child processes (tiny `node -e` programs) and short
// delays: restarts with the policy's delays and one log line each, gives up once on a crash loop,
// stops (SIGTERM, then SIGKILL past the bound) and kills for good, forwards signals, and counts a
// child that could not be started as a crash.
import { spawn } from 'node:child_process'
import t from 'tap'
import { Supervisor } from '../../src/cli/supervisor.js'
import { EVENT_TIMEOUT_MS, until } from '../helpers/poll.js'
import { PROCESS_START_TIMEOUT_MS } from '../helpers/ports.js'

// The crash-loop window is wide: four starts of a node process took over 30 s at load 30, and a
// window they do not fit in would never declare the loop (the count is what is tested, not the pace).
const FAST = { firstDelayMs: 20, maxDelayMs: 40, crashLoopCrashes: 4, crashLoopWindowMs: 600_000 }

function node (program: string): () => ReturnType<typeof spawn> {
  return () => spawn(process.execPath, ['-e', program], { stdio: ['ignore', 'pipe', 'inherit'] })
}

/** A child that runs until SIGTERM (then exits 0) and says when it is ready. */
const LONG_RUNNING = "process.on('SIGTERM', () => process.exit(0)); process.on('SIGHUP', () => console.log('hup')); console.log('ready'); setInterval(() => {}, 1000)"

async function ready (child: ReturnType<typeof spawn>): Promise<void> {
  await new Promise<void>((resolve) => child.stdout?.on('data', (c: Buffer) => { if (c.toString().includes('ready')) resolve() }))
}

t.test('a child that keeps exiting is restarted with growing delays, then given up on once', async (t) => {
  const lines: string[] = []
  const gaveUp: string[] = []
  let starts = 0
  const supervisor = new Supervisor({
    name: 'worker',
    start: () => { starts++; return node('process.exit(3)')() },
    log: (line) => lines.push(line),
    onGiveUp: (line) => gaveUp.push(line),
    policy: FAST
  })
  await until('the give-up', () => gaveUp.length > 0, PROCESS_START_TIMEOUT_MS)
  t.same(gaveUp, ['worker exited 4 times within 600 s (last: code 3); not restarting it again'])
  t.equal(starts, 4)
  t.same(lines.filter((l) => l.includes('restarting')), [
    'worker exited (code 3); restarting it in 20 ms',
    'worker exited (code 3); restarting it in 40 ms',
    'worker exited (code 3); restarting it in 40 ms'
  ], 'doubling, capped at 40 ms')
  t.equal(lines.filter((l) => /^worker restarted \(pid \d+\)$/.test(l)).length, 3)
  t.notOk(supervisor.running)
  t.equal(await supervisor.stop(1000), true, 'nothing running: a clean stop')
})

t.test('a killed child is restarted and runs again; stop ends it with SIGTERM, for good', async (t) => {
  const lines: string[] = []
  const supervisor = new Supervisor({ name: 'svc', start: node(LONG_RUNNING), log: (line) => lines.push(line), onGiveUp: () => t.fail('no loop'), policy: FAST })
  await ready(supervisor.child)
  const first = supervisor.child
  first.kill('SIGKILL')
  await until('a new child', () => supervisor.child !== first && supervisor.running, EVENT_TIMEOUT_MS)
  await ready(supervisor.child)
  t.equal(lines[0], 'svc exited (SIGKILL); restarting it in 20 ms')
  t.match(lines[1], new RegExp(`^svc restarted \\(pid ${supervisor.child.pid ?? 0}\\)$`))
  const second = supervisor.child
  t.equal(await supervisor.stop(5_000), true, 'exited 0 on SIGTERM')
  t.equal(second.exitCode, 0)
  await new Promise((resolve) => setTimeout(resolve, 100))
  t.equal(supervisor.child, second, 'not restarted after the stop')
  t.equal(lines.length, 2)
})

t.test('stop kills a child that ignores SIGTERM after the bound, and says it was not clean', async (t) => {
  const supervisor = new Supervisor({
    name: 'stubborn',
    start: node("process.on('SIGTERM', () => {}); console.log('ready'); setInterval(() => {}, 1000)"),
    log: () => {},
    onGiveUp: () => t.fail('no loop'),
    policy: FAST
  })
  await ready(supervisor.child)
  const started = Date.now()
  t.equal(await supervisor.stop(300), false)
  t.equal(supervisor.child.signalCode, 'SIGKILL')
  t.ok(Date.now() - started >= 250, 'after the bound, not before')
})

t.test('stopRestarting cancels a pending restart; kill ends a running child at once, for good', async (t) => {
  let starts = 0
  let restartAnnounced = false
  const waiting = new Supervisor({
    name: 'w',
    start: () => { starts++; return node('process.exit(1)')() },
    // Cancelled right after the restart is scheduled (a microtask: its timer is set, and no timer can
    // run before it), not after a poll saw the exit: a poll on a loaded machine can come later than
    // the 300 ms, and the restart it meant to cancel would have happened.
    log: (line) => { if (line.includes('restarting it in 300 ms')) queueMicrotask(() => { restartAnnounced = true; waiting.stopRestarting() }) },
    onGiveUp: () => t.fail('no loop'),
    // FAST caps every delay at 40 ms: the cap is raised too, or the restart would come after 40.
    policy: { ...FAST, firstDelayMs: 300, maxDelayMs: 300 }
  })
  await until('the first exit', () => restartAnnounced, EVENT_TIMEOUT_MS)
  await new Promise((resolve) => setTimeout(resolve, 500))
  t.equal(starts, 1, 'the restart 300 ms later never came')

  const running = new Supervisor({ name: 'r', start: node(LONG_RUNNING), log: () => {}, onGiveUp: () => t.fail('no loop'), policy: FAST })
  await ready(running.child)
  const child = running.child
  running.kill()
  await until('killed', () => child.signalCode === 'SIGKILL', EVENT_TIMEOUT_MS)
  await new Promise((resolve) => setTimeout(resolve, 100))
  t.equal(running.child, child, 'not restarted')
})

t.test('signals reach the running child only', async (t) => {
  const supervisor = new Supervisor({ name: 's', start: node(LONG_RUNNING), log: () => {}, onGiveUp: () => t.fail('no loop'), policy: FAST })
  t.teardown(() => supervisor.kill())
  await ready(supervisor.child)
  let out = ''
  supervisor.child.stdout?.on('data', (c: Buffer) => { out += c.toString() })
  supervisor.signal('SIGHUP')
  await until('the SIGHUP', () => out.includes('hup'), EVENT_TIMEOUT_MS)
  t.pass('forwarded')
})

t.test('a child that cannot be started counts as a crash', async (t) => {
  const lines: string[] = []
  const gaveUp: string[] = []
  const supervisor = new Supervisor({
    name: 'missing',
    start: () => spawn('/nonexistent/program', [], { stdio: 'ignore' }),
    log: (line) => lines.push(line),
    onGiveUp: (line) => gaveUp.push(line),
    policy: FAST
  })
  await until('the give-up', () => gaveUp.length > 0, PROCESS_START_TIMEOUT_MS)
  t.match(lines[0], /^missing exited \(spawn \/nonexistent\/program ENOENT\); restarting it in 20 ms$/)
  t.same(gaveUp, ['missing exited 4 times within 600 s (last: spawn /nonexistent/program ENOENT); not restarting it again'])
  t.notOk(supervisor.running)
})
