// The kernel's process accounting records (acct(5), version 3): one 64-byte record per process that
// ended, with its pid, its parent's pid, its command and the CPU it used, children not included. Read
// here so a suite's CPU can be put on the test file whose process tree spent it (bench/suite-cpu.ts):
// the processes a test starts (redis-server, gateways, backends, CLIs) and their own children too,
// which neither tap's per-file times nor a sampler that misses short-lived processes can see.

/** One ended process, as its accounting record gives it. */
export interface AccountedProcess {
  readonly pid: number
  readonly parentPid: number
  /** The command's name (the kernel's 16 bytes at most; Node's main thread names itself MainThread). */
  readonly command: string
  /** User and system CPU of the process itself, seconds. */
  readonly cpuSeconds: number
  readonly exitCode: number
}

const RECORD_BYTES = 64
const VERSION_3 = 3
/** The clock ticks a comp_t counts in (AHZ on Linux). */
const TICKS_PER_SECOND = 100

/** A comp_t: a 13-bit mantissa and a 3-bit base-8 exponent. */
export function compT (value: number): number {
  return (value & 0x1fff) * 8 ** ((value >> 13) & 0x7)
}

/**
 * The records of an accounting file (struct acct_v3: flag, version, tty, exitcode, uid, gid, pid, ppid,
 * btime, etime float, then utime, stime and six more comp_t, then comm[16]). A record of another
 * version (an older kernel's format) is an error: its layout is not this one.
 */
export function parseAccounting (bytes: Buffer): AccountedProcess[] {
  const processes: AccountedProcess[] = []
  for (let at = 0; at + RECORD_BYTES <= bytes.length; at += RECORD_BYTES) {
    const version = bytes.readUInt8(at + 1)
    if (version !== VERSION_3) throw new Error(`accounting record ${at / RECORD_BYTES}: version ${version}, not ${VERSION_3}`)
    const commandBytes = bytes.subarray(at + 48, at + 64)
    const end = commandBytes.indexOf(0)
    processes.push({
      exitCode: bytes.readUInt32LE(at + 4),
      pid: bytes.readUInt32LE(at + 16),
      parentPid: bytes.readUInt32LE(at + 20),
      cpuSeconds: (compT(bytes.readUInt16LE(at + 32)) + compT(bytes.readUInt16LE(at + 34))) / TICKS_PER_SECOND,
      command: commandBytes.subarray(0, end === -1 ? 16 : end).toString('latin1')
    })
  }
  return processes
}

/** CPU put on a test file: its own process and every process below it. */
export interface FileCpu {
  readonly file: string
  readonly cpuSeconds: number
  readonly processes: number
  /** Seconds per command name in the file's tree, the largest first. */
  readonly byCommand: ReadonlyArray<readonly [string, number]>
}

/**
 * Puts each ended process on the outermost ancestor that ran a test file (`fileOfPid`, seen while the
 * suite ran): a test that runs tap on a fixture's test file pays for it. A process under none (the
 * runner, npm, the coverage report) goes on `(outside)`.
 */
export function cpuPerFile (processes: readonly AccountedProcess[], fileOfPid: ReadonlyMap<number, string>): FileCpu[] {
  const parentOf = new Map(processes.map((p) => [p.pid, p.parentPid]))
  const totals = new Map<string, { cpu: number, processes: number, byCommand: Map<string, number> }>()
  for (const ended of processes) {
    let file: string | undefined
    for (let pid = ended.pid, hops = 0; pid > 1 && hops < 64; hops++) {
      file = fileOfPid.get(pid) ?? file
      pid = parentOf.get(pid) ?? 0
    }
    const key = file ?? '(outside)'
    const entry = totals.get(key) ?? { cpu: 0, processes: 0, byCommand: new Map<string, number>() }
    entry.cpu += ended.cpuSeconds
    entry.processes++
    entry.byCommand.set(ended.command, (entry.byCommand.get(ended.command) ?? 0) + ended.cpuSeconds)
    totals.set(key, entry)
  }
  return [...totals].map(([file, entry]) => ({
    file,
    cpuSeconds: entry.cpu,
    processes: entry.processes,
    byCommand: [...entry.byCommand].sort((a, b) => b[1] - a[1])
  })).sort((a, b) => b.cpuSeconds - a.cpuSeconds)
}
