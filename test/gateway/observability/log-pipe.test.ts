// Issue 39, row 2: a log destination that fails costs log lines, never requests, never signal
// handling. A real gateway process whose stdout and stderr are pipes: (1) the reader closes them
// (the shipper or the `node server | …` reader exits: EPIPE), (2) the reader stops reading (a slow
// shipper: the pipe fills). Before: both listeners stopped answering and SIGTERM no longer stopped
// the process. Now: every request is answered, the lost lines are counted in
// gateway_log_lines_dropped_total, and SIGTERM ends the process within the drain bound.
// Then the destination itself in this process, on a named pipe the test reads (or closes) and on files:
// what passes, what is dropped and counted, and the write at exit.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { closeSync, constants, mkdtempSync, openSync, readFileSync, readSync, rmSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import t, { type Test } from 'tap'
import { startBackend } from '../../helpers/backend.js'
import { DEMO_KEYS, FIXTURE_CONFIG_DIR } from '../../helpers/config-fixture.js'
import { freePort, waitForHttp } from '../../helpers/ports.js'
import { CHILD_ENV, gatewayProcessEnv, REPO_ROOT, TS_NODE_ARGS } from '../../helpers/processes.js'
import { sampleValue, scrape } from '../../helpers/scrape.js'
import { LogDestination } from '../../../src/gateway/observability/log-destination.js'

const DRAIN_DELAY_MS = 200
const GRACE_MS = 2_000
/** server.ts's bound on the whole stop: drain delay + grace + its 5 s margin for closing the rest. */
const STOP_BOUND_MS = DRAIN_DELAY_MS + GRACE_MS + 5_000
/** Each request writes a log line of about 400 bytes: this many fill a 64 KiB pipe several times over. */
const REQUESTS = 1_500
const CONCURRENCY = 16
const BACKLOG_BYTES = 64 * 1024

interface Gateway {
  child: ChildProcess
  port: number
  adminPort: number
  exited: Promise<number | null>
}

async function startPipedGateway (t: Test): Promise<Gateway> {
  const backend = await startBackend(t)
  const [port, adminPort] = [await freePort(), await freePort()]
  const env = gatewayProcessEnv({ port, adminPort, backendUrl: backend.url, configDir: FIXTURE_CONFIG_DIR }, {
    LOG_LEVEL: 'info',
    SHUTDOWN_DRAIN_DELAY_MS: String(DRAIN_DELAY_MS),
    SHUTDOWN_GRACE_MS: String(GRACE_MS),
    // A small backlog: the unread pipe overflows within the test's requests.
    LOG_BACKLOG_BYTES: String(BACKLOG_BYTES)
  })
  const child = spawn(process.execPath, [...TS_NODE_ARGS, join(REPO_ROOT, 'src/gateway/server.ts')], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...CHILD_ENV, ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  const exited = new Promise<number | null>((resolve) => { child.once('exit', (code) => resolve(code)) })
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL')
      await exited
    }
  })
  let output = ''
  const collect = (chunk: Buffer): void => { output += chunk.toString() }
  child.stdout?.on('data', collect)
  child.stderr?.on('data', collect)
  try {
    // A loaded machine can take long to start a process.
    await waitForHttp(`http://127.0.0.1:${adminPort}/readyz`, 90_000, (s) => s === 200)
  } catch (err) {
    throw new Error(`gateway not ready: ${String(err)}; output: ${output.slice(-2_000)}`)
  }
  child.stdout?.off('data', collect)
  child.stderr?.off('data', collect)
  return { child, port, adminPort, exited }
}

/** `REQUESTS` keyed requests, `CONCURRENCY` at a time, each bounded: the statuses seen (0: no answer in 5 s). */
async function load (port: number): Promise<Map<number, number>> {
  const statuses = new Map<number, number>()
  let next = 0
  const worker = async (): Promise<void> => {
    while (next++ < REQUESTS) {
      let status = 0
      try {
        const res = await fetch(`http://127.0.0.1:${port}/v1/pets?limit=1`, { headers: { authorization: `Bearer ${DEMO_KEYS.enterprise}` }, signal: AbortSignal.timeout(5_000) })
        await res.arrayBuffer()
        status = res.status
      } catch {
        status = 0
      }
      statuses.set(status, (statuses.get(status) ?? 0) + 1)
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
  return statuses
}

async function assertServesAndStops (t: Test, gw: Gateway): Promise<void> {
  const statuses = await load(gw.port)
  t.comment(`statuses: ${JSON.stringify([...statuses])}`)
  t.equal(statuses.get(200), REQUESTS, `every one of ${REQUESTS} requests answered 200`)
  const health = await fetch(`http://127.0.0.1:${gw.adminPort}/healthz`, { signal: AbortSignal.timeout(5_000) })
  t.equal(health.status, 200, 'the admin listener answers')
  const { samples } = await scrape(`http://127.0.0.1:${gw.adminPort}`)
  const dropped = sampleValue(samples, 'gateway_log_lines_dropped_total') ?? 0
  t.comment(`log lines dropped: ${dropped}`)
  t.ok(dropped > 0, 'the lines the destination could not take are counted as dropped')

  const signalled = performance.now()
  gw.child.kill('SIGTERM')
  const code = await Promise.race([gw.exited, new Promise<'running'>((resolve) => setTimeout(() => resolve('running'), STOP_BOUND_MS + 2_000))])
  const tookMs = performance.now() - signalled
  t.comment(`exit ${String(code)} ${Math.round(tookMs)} ms after SIGTERM`)
  t.equal(code, 0, 'SIGTERM stops the process cleanly')
  t.ok(tookMs <= STOP_BOUND_MS, `within the drain bound (${Math.round(tookMs)} ≤ ${STOP_BOUND_MS} ms)`)
}

t.test('stdout and stderr closed by their reader (EPIPE): every request answered, lines counted as dropped, SIGTERM stops it', async (t) => {
  const gw = await startPipedGateway(t)
  gw.child.stdout?.destroy()
  gw.child.stderr?.destroy()
  await assertServesAndStops(t, gw)
})

t.test('stdout not read (a slow reader, the pipe full): every request answered, lines counted as dropped, SIGTERM stops it', async (t) => {
  const gw = await startPipedGateway(t)
  // Nobody reads: the pipe's buffer fills after a few hundred lines.
  gw.child.stdout?.pause()
  gw.child.stderr?.pause()
  await assertServesAndStops(t, gw)
})

// The destination itself, in this process: a named pipe (mkfifo) gives a pipe whose reader the test holds.
interface Fifo { reader: number, writer: number }

function openFifo (t: Test): Fifo {
  const dir = mkdtempSync(join(tmpdir(), 'log-fifo-'))
  const path = join(dir, 'pipe')
  execFileSync('mkfifo', [path])
  // The reader first (non-blocking, so neither open waits for the other end).
  const reader = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK)
  const writer = openSync(path, constants.O_WRONLY)
  const fifo = { reader, writer }
  t.teardown(() => {
    for (const fd of [fifo.reader, fifo.writer]) {
      try { closeSync(fd) } catch { /* closed by the test */ }
    }
    rmSync(dir, { recursive: true, force: true })
  })
  return fifo
}

/** What the pipe holds now (the reader is non-blocking: an empty pipe reads as ''). */
function readAvailable (fd: number): string {
  const buffer = Buffer.alloc(1024 * 1024)
  let text = ''
  for (;;) {
    try {
      const read = readSync(fd, buffer)
      if (read === 0) return text
      text += buffer.toString('utf8', 0, read)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EAGAIN') return text
      throw err
    }
  }
}

/** Reads until `lines` whole lines arrived or 10 s passed (the destination writes as the pipe drains). */
async function readLines (fd: number, lines: number): Promise<string[]> {
  let text = ''
  const deadline = Date.now() + 10_000
  while (text.split('\n').length - 1 < lines && Date.now() < deadline) {
    text += readAvailable(fd)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  return text.split('\n').slice(0, -1)
}

t.test('LogDestination on a pipe: lines pass through; past the backlog a reader that does not read costs lines, counted, and every line not counted arrives whole', async (t) => {
  const fifo = openFifo(t)
  const backlogBytes = 4096
  const destination = new LogDestination({ fd: fifo.writer, bufferBytes: 0, backlogBytes })
  destination.write('{"msg":"first"}\n')
  t.same(await readLines(fifo.reader, 1), ['{"msg":"first"}'], 'a line goes through the pipe')

  // 300 lines of 1 KiB, nothing read meanwhile: the kernel's pipe (64 KiB) fills, then the backlog, then lines are dropped.
  const line = (index: number): string => JSON.stringify({ index, pad: 'x'.repeat(1000) }) + '\n'
  const LINES = 300
  for (let index = 0; index < LINES; index++) destination.write(line(index))
  const dropped = destination.dropped
  t.ok(dropped > 0 && dropped < LINES, `an unread pipe costs lines: ${dropped} of ${LINES} dropped`)
  const arrived = await readLines(fifo.reader, LINES - dropped)
  t.equal(arrived.length, LINES - dropped, 'every line not counted as dropped arrives')
  t.ok(arrived.every((text) => typeof (JSON.parse(text) as { index: unknown }).index === 'number'), 'each one whole')
  const indexes = arrived.map((text) => (JSON.parse(text) as { index: number }).index)
  t.same(indexes, [...indexes].sort((a, b) => a - b), 'in the order they were written')
  t.equal(destination.dropped, dropped, 'nothing more lost once the reader caught up')
})

t.test('LogDestination on a pipe whose reader closed (EPIPE): every line from then on is dropped and counted, nothing throws', async (t) => {
  const fifo = openFifo(t)
  const destination = new LogDestination({ fd: fifo.writer, bufferBytes: 100, backlogBytes: 4096 })
  closeSync(fifo.reader)
  destination.write(JSON.stringify({ msg: 'x'.repeat(120) }) + '\n') // past bufferBytes: written, and fails with EPIPE
  destination.write('{"msg":"batched"}\n') // held in the batch meanwhile
  const deadline = Date.now() + 10_000
  while (destination.dropped < 1 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5))
  t.equal(destination.dropped, 1, 'the line the pipe refused is counted')
  destination.flushSync()
  t.equal(destination.dropped, 2, 'the batch waiting when the pipe broke is counted on its flush')
  destination.write('{"msg":"later"}\n')
  destination.flushOnExit()
  t.equal(destination.dropped, 3, 'a line after is dropped at once')
})

t.test('LogDestination on a pipe at exit: the batch is written in one attempt that cannot block, or counted when the pipe is full', async (t) => {
  const fifo = openFifo(t)
  const destination = new LogDestination({ fd: fifo.writer, bufferBytes: 1024 * 1024, backlogBytes: 4096 })
  destination.write('{"msg":"batched at exit"}\n')
  destination.flushOnExit()
  t.same(await readLines(fifo.reader, 1), ['{"msg":"batched at exit"}'], 'written straight to the pipe')
  t.equal(destination.dropped, 0)
  // A line logged after it (another exit listener) is written alone: the batch left with the exit's write.
  destination.write('{"msg":"after exit"}\n')
  destination.flushOnExit()
  t.same(await readLines(fifo.reader, 1), ['{"msg":"after exit"}'], 'the batch written at exit is not written again')

  // The pipe full (the destination's handle made it non-blocking): the exit's write fails with EAGAIN, not a hang.
  const chunk = Buffer.alloc(4096, 'y')
  let filled = false
  for (let writes = 0; writes < 1024 && !filled; writes++) {
    try { writeSync(fifo.writer, chunk) } catch (err) { filled = (err as NodeJS.ErrnoException).code === 'EAGAIN' }
  }
  t.ok(filled, 'the pipe is full')
  destination.write('{"msg":"one"}\n')
  destination.write('{"msg":"two"}\n')
  destination.flushOnExit()
  t.equal(destination.dropped, 2, 'the two lines the full pipe could not take are counted')
})

t.test('LogDestination on a file: batched lines written at once on flush; a failing write (a full disk) or a descriptor that is not open costs its lines, counted', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'log-file-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const path = join(dir, 'gateway.log')
  const fd = openSync(path, 'w')
  t.teardown(() => { closeSync(fd) })
  const file = new LogDestination({ fd, bufferBytes: 1024 })
  file.write('{"msg":"a"}\n')
  file.write('{"msg":"b"}\n')
  t.equal(readFileSync(path, 'utf8'), '', 'batched below bufferBytes')
  let flushed = false
  file.flush(() => { flushed = true })
  t.ok(flushed, 'flush calls back')
  t.equal(readFileSync(path, 'utf8'), '{"msg":"a"}\n{"msg":"b"}\n', 'both lines written, in order')
  file.write('{"msg":"c"}\n')
  file.flushOnExit()
  t.equal(readFileSync(path, 'utf8'), '{"msg":"a"}\n{"msg":"b"}\n{"msg":"c"}\n', 'and what is batched at exit')
  t.equal(file.dropped, 0)

  const devFull = openSync('/dev/full', 'w')
  t.teardown(() => { closeSync(devFull) })
  const full = new LogDestination({ fd: devFull, bufferBytes: 0 })
  full.write('{"msg":"lost"}\n')
  full.write('{"msg":"lost too"}\n')
  t.equal(full.dropped, 2, 'ENOSPC: each line lost is counted, and the next write tries again')

  const notOpen = new LogDestination({ fd: 987_654, bufferBytes: 0 })
  notOpen.write('{"msg":"nowhere"}\n')
  t.equal(notOpen.dropped, 1, 'a descriptor that is not open: counted, not thrown')
})
