// What a child process was doing when a test gave up waiting for it: a process that never answers
// leaves a failure that names a timeout and nothing else (a gateway at LOG_LEVEL=warn prints nothing
// while it starts). Read from outside, so it works whatever the child is stuck in: each thread's
// kernel state and the system call it waits in (/proc), the CPU it used, and — when its event loop
// still turns — Node's diagnostic report, asked for by signal (runEntry starts every child with
// reportNodeArgs()): every libuv handle still open (timers, sockets, workers).
import { mkdirSync, readdirSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { poll } from './poll.js'

/** Where the children's diagnostic reports go (Node names each file with the process's pid). */
export const REPORT_DIR = join(tmpdir(), 'petstore-child-reports')

/** The signal a child writes its diagnostic report on (SIGUSR2 is the benches' heap-sampling signal). */
const REPORT_SIGNAL = 'SIGPWR'

/** Node arguments that make a child write its diagnostic report on REPORT_SIGNAL, into REPORT_DIR. */
export function reportNodeArgs (): string[] {
  mkdirSync(REPORT_DIR, { recursive: true })
  return ['--report-on-signal', `--report-signal=${REPORT_SIGNAL}`, `--report-directory=${REPORT_DIR}`, '--report-compact']
}

/** The x86-64 system calls a stuck Node thread is usually found in. */
const SYSCALL_NAMES: Readonly<Record<string, string>> = {
  0: 'read', 1: 'write', 7: 'poll', 23: 'select', 35: 'nanosleep', 202: 'futex', 230: 'clock_nanosleep', 232: 'epoll_wait', 281: 'epoll_pwait', 441: 'epoll_pwait2', 61: 'wait4', 42: 'connect', 43: 'accept', 288: 'accept4'
}

function readOr (path: string, fallback: string): string {
  try {
    return readFileSync(path, 'utf8').trim()
  } catch {
    return fallback
  }
}

/** One line per thread: name, state (R running, S sleeping, D disk), the system call it waits in, wchan. */
export function threadStates (pid: number): string[] {
  let tids: string[]
  try {
    tids = readdirSync(`/proc/${pid}/task`)
  } catch {
    return [`pid ${pid}: gone`]
  }
  return tids.map((tid) => {
    const base = `/proc/${pid}/task/${tid}`
    const stat = readOr(`${base}/stat`, '')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const syscall = readOr(`${base}/syscall`, '?').split(' ')[0] ?? '?'
    const cpuTicks = Number(fields[11] ?? 0) + Number(fields[12] ?? 0)
    return `${tid} ${readOr(`${base}/comm`, '?')}: state ${fields[0] ?? '?'}, syscall ${SYSCALL_NAMES[syscall] ?? syscall}, wchan ${readOr(`${base}/wchan`, '?')}, cpu ${cpuTicks} ticks`
  })
}

interface DiagnosticReport {
  javascriptStack?: { message?: string, stack?: string[] }
  libuv?: Array<{ type?: string, is_active?: boolean, is_referenced?: boolean, localEndpoint?: unknown, remoteEndpoint?: unknown, details?: unknown }>
  workers?: unknown[]
}

/** The report `pid` wrote, once it is whole (Node writes it in place: a half-written one does not parse yet). */
function reportOf (pid: number): { file: string, report: DiagnosticReport } | undefined {
  try {
    const file = readdirSync(REPORT_DIR).find((name) => name.includes(`.${pid}.`) && name.endsWith('.json'))
    return file === undefined ? undefined : { file, report: JSON.parse(readFileSync(join(REPORT_DIR, file), 'utf8')) as DiagnosticReport }
  } catch {
    return undefined
  }
}

/** What `pid` was doing: its threads, and its diagnostic report if it writes one within `reportWaitMs`. */
export async function diagnoseChild (pid: number | undefined, reportWaitMs = 5_000): Promise<string> {
  if (pid === undefined) return 'never started (no pid)'
  const lines = [`threads of ${pid}:`, ...threadStates(pid).map((line) => `  ${line}`)]
  try {
    process.kill(pid, REPORT_SIGNAL)
  } catch (err) {
    return [...lines, `no report: ${err instanceof Error ? err.message : String(err)}`].join('\n')
  }
  const written = await poll(() => reportOf(pid), reportWaitMs, 100)
  if (written === undefined) return [...lines, `no diagnostic report within ${reportWaitMs} ms: its event loop does not turn`].join('\n')
  const { file, report } = written
  const handles = (report.libuv ?? []).filter((h) => h.is_active === true).map((h) => `  ${h.type ?? '?'}${h.is_referenced === true ? '' : ' (unref)'} ${JSON.stringify(h.localEndpoint ?? h.details ?? '')} ${h.remoteEndpoint === undefined ? '' : `→ ${JSON.stringify(h.remoteEndpoint)}`}`)
  return [
    ...lines,
    `report ${join(REPORT_DIR, file)}:`,
    `javascript stack: ${report.javascriptStack?.message ?? ''}`,
    ...(report.javascriptStack?.stack ?? []).slice(0, 12).map((frame) => `  ${frame}`),
    `active libuv handles (${handles.length}):`,
    ...handles.slice(0, 40),
    `workers: ${report.workers?.length ?? 0}`
  ].join('\n')
}
