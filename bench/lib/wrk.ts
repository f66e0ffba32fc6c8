// Closed-loop load with wrk when it is installed: a C load generator costs the machine far less CPU
// per request than autocannon in the bench's own event loop, which matters on two shared cores.
// Tokens are sent one per request, in turn or in a precomputed order (the Zipf workload), from a Lua
// script (the same script for one token or 10,000, so workloads compare fairly: requests are
// formatted once in init, and each request costs one table lookup either way). Bounded by
// its duration, plus a hard kill a few seconds later.
import { execFile } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { taskset } from './proc-cpu.js'
import type { LoadOptions, Run } from './load.js'

const KILL_GRACE_MS = 10_000
let wrkPath: string | null | undefined

export function wrkAvailable (): boolean {
  if (wrkPath === undefined) {
    wrkPath = null
    for (const dir of (process.env.PATH ?? '/usr/bin:/bin').split(':')) {
      if (existsSync(`${dir}/wrk`)) { wrkPath = `${dir}/wrk`; break }
    }
  }
  return wrkPath !== null
}

/** The wrk script sending `tokens` in turn, or in `order` (0-based indices into `tokens`). */
export function luaScript (tokens: readonly string[], order?: readonly number[]): string {
  const list = tokens.map((t) => `"${t.replace(/[^A-Za-z0-9_\-.~]/g, '')}"`).join(',\n')
  // The order as one string parsed in init(): a table constructor of 100,000s of entries can
  // exceed a Lua function's limits, a long string cannot.
  const ordered = order !== undefined && order.length > 0
  return [
    `local tokens = {${list}}`,
    'local requests = {}',
    ...ordered ? [`local order_text = "${order.map((k) => String(Math.trunc(k) + 1)).join(' ')}"`, 'local order = {}'] : [],
    'local i = 0',
    // Formatted in init(): wrk sets the Host header only then.
    'init = function(args)',
    '  for k, t in ipairs(tokens) do requests[k] = wrk.format(nil, nil, { ["Authorization"] = "Bearer " .. t }) end',
    ...ordered ? ['  for x in order_text:gmatch("%d+") do order[#order + 1] = requests[tonumber(x)] end'] : [],
    'end',
    ...ordered
      ? ['local n = 0', 'request = function()', '  if n == 0 then n = #order end', '  i = i % n + 1', '  return order[i]', 'end']
      : ['local n = #tokens', 'request = function()', '  i = i % n + 1', '  return requests[i]', 'end'],
    ''
  ].join('\n')
}

function toMs (value: string, unit: string): number {
  const x = Number(value)
  if (unit === 'us') return x / 1000
  if (unit === 's') return x * 1000
  if (unit === 'm') return x * 60_000
  return x
}

export function parseWrk (out: string): Run {
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? NaN)
  const total = Number(/(\d+) requests in/.exec(out)?.[1] ?? NaN)
  const pct = (p: string): number => {
    const m = new RegExp(`^\\s+${p}%\\s+([\\d.]+)(us|ms|s|m)\\s*$`, 'm').exec(out)
    return m === null ? NaN : toMs(m[1] ?? '', m[2] ?? 'ms')
  }
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0)
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out)
  const errors = sock === null ? 0 : sock.slice(1).reduce((a, x) => a + Number(x), 0)
  const errorsByKind = sock === null ? undefined : { connect: Number(sock[1]), read: Number(sock[2]), write: Number(sock[3]), timeout: Number(sock[4]) }
  return { requestsPerSecond: rps, total, latencyP50Ms: pct('50'), latencyP99Ms: pct('99'), non2xx, errors, ...(errorsByKind === undefined ? {} : { errorsByKind }) }
}

/** One wrk run (1 thread; `opts.connections` connections) on `cpus` when given. */
export async function wrkThroughput (opts: LoadOptions & { cpus?: string }): Promise<Run> {
  if (!wrkAvailable() || wrkPath === null || wrkPath === undefined) throw new Error('wrk is not installed')
  const dir = mkdtempSync(join(tmpdir(), 'petstore-wrk-'))
  const script = join(dir, 'tokens.lua')
  writeFileSync(script, luaScript(opts.tokens, opts.order))
  const args = ['-t1', `-c${opts.connections}`, `-d${opts.seconds}s`, '--latency', '-s', script, opts.url]
  const pin = opts.cpus === undefined ? null : taskset()
  const [command, argv] = pin === null || opts.cpus === undefined ? [wrkPath, args] : [pin, ['-c', opts.cpus, wrkPath, ...args]]
  try {
    const out = await new Promise<string>((resolve, reject) => {
      execFile(command, argv, { timeout: opts.seconds * 1000 + KILL_GRACE_MS, maxBuffer: 1 << 20 }, (err, stdout) => {
        if (err !== null) reject(err); else resolve(stdout)
      })
    })
    const run = parseWrk(out)
    if (!Number.isFinite(run.requestsPerSecond)) throw new Error(`could not read wrk's output:\n${out}`)
    return run
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/**
 * wrk running a Lua script of the caller's (an attack's pipelined writes) against `url` for `seconds`,
 * on `cpus` when taskset is there; killed KILL_GRACE_MS after its duration. Its parsed figures and its output.
 */
export async function wrkWithScript (url: string, seconds: number, opts: { script: string, connections: number, cpus: string, extraArgs?: readonly string[], tmpPrefix: string }): Promise<Run & { raw: string }> {
  const dir = mkdtempSync(join(tmpdir(), opts.tmpPrefix))
  const script = join(dir, 'script.lua')
  writeFileSync(script, opts.script)
  const args = ['-t1', `-c${opts.connections}`, `-d${seconds}s`, ...(opts.extraArgs ?? []), '-s', script, url]
  const pin = taskset()
  const [command, argv] = pin === null ? ['wrk', args] : [pin, ['-c', opts.cpus, 'wrk', ...args]]
  try {
    const raw = await new Promise<string>((resolve, reject) => {
      execFile(command, argv, { timeout: seconds * 1000 + KILL_GRACE_MS, maxBuffer: 1 << 20 }, (err, stdout) => { if (err !== null) reject(err); else resolve(stdout) })
    })
    return { ...parseWrk(raw), raw }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
