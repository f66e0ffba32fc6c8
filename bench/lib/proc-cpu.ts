// CPU time of processes as the kernel counts it (/proc/PID/stat utime + stime), so the bench can
// report CPU per request — on a shared machine far steadier than req/s, which any neighbour's load
// moves — and pin each process to a core with `taskset` so the server under test does not share
// its core with the backend, Redis or the load generator.
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'

/** Linux's USER_HZ is 100 on every common build; `getconf CLK_TCK` says for sure when it is there. */
export const DEFAULT_CLOCK_TICKS = 100

let ticksPerSecond: number | undefined

function clockTicks (): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number.parseInt(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim(), 10) || DEFAULT_CLOCK_TICKS
    } catch {
      ticksPerSecond = DEFAULT_CLOCK_TICKS
    }
  }
  return ticksPerSecond
}

/** utime + stime of one process in µs; 0 once it is gone. */
function ownMicros (pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name (field 2) may hold spaces and parentheses: fields are counted after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) * 1e6 / clockTicks()
  } catch {
    return 0
  }
}

function childrenOf (pid: number): number[] {
  const out: number[] = []
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const text = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim()
      if (text !== '') for (const c of text.split(' ')) out.push(Number(c))
    }
  } catch { /* gone, or no children file on this kernel */ }
  return out
}

/** `own` summed over `pid` and every live descendant (a cluster primary and its workers); NaN without a pid. */
function overTree (pid: number | undefined, own: (pid: number) => number): number {
  if (pid === undefined) return NaN
  let total = own(pid)
  for (const child of childrenOf(pid)) total += overTree(child, own)
  return total
}

/** Read and write system calls so far of one process (/proc/PID/io syscr + syscw; 0 where unreadable). */
function ownIoCalls (pid: number): number {
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8')
    return Number(/syscr: (\d+)/.exec(io)?.[1] ?? 0) + Number(/syscw: (\d+)/.exec(io)?.[1] ?? 0)
  } catch {
    return 0 // gone, or not ours to read
  }
}

/** System (kernel) CPU µs so far of one process: its share of the CPU is the sockets' and the scheduler's. */
function ownSystemMicros (pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[12]) * 1e6 / clockTicks()
  } catch {
    return 0 // gone
  }
}

/** CPU µs used so far by `pid` and every live descendant. */
export function cpuMicros (pid: number | undefined): number {
  return overTree(pid, ownMicros)
}

/**
 * On-CPU time of `pid`'s main thread so far (µs), from /proc/PID/schedstat's nanoseconds: finer than the
 * tick-sampled utime + stime, for a process whose work is one thread (redis-server's commands and scripts).
 */
export function mainThreadCpuMicros (pid: number): number {
  return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1000
}

/** Read and write system calls so far of `pid` and every live descendant. */
export function ioCalls (pid: number | undefined): number {
  return overTree(pid, ownIoCalls)
}

/** System (kernel) CPU µs so far of `pid` and every live descendant. */
export function systemMicros (pid: number | undefined): number {
  return overTree(pid, ownSystemMicros)
}

export function procAvailable (): boolean {
  return existsSync(`/proc/${process.pid}/stat`)
}

let tasksetPath: string | null | undefined

/** Path of `taskset`, or null when it is not installed (then nothing is pinned). */
export function taskset (): string | null {
  if (tasksetPath === undefined) {
    tasksetPath = null
    for (const dir of (process.env.PATH ?? '/usr/bin:/bin').split(':')) {
      if (existsSync(`${dir}/taskset`)) { tasksetPath = `${dir}/taskset`; break }
    }
  }
  return tasksetPath
}

/** Pins an already running process (all its threads) to `cpus` (e.g. "1"); false when it could not. */
export function pinProcess (pid: number, cpus: string): boolean {
  const bin = taskset()
  if (bin === null) return false
  try {
    execFileSync(bin, ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}
