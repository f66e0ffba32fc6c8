// The processes a load bench runs against: each server under test in a child process of its own
// (never in the process that drives the load, so they do not share an event loop), on loopback and
// free ports, and stopped by PID when the bench ends — whatever happened. Shared by bench/run.ts and
// bench/metrics-overhead.ts.
import { spawn, type ChildProcess } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { until } from '../../test/helpers/poll.js'
import { freePort, waitForHttp as waitForAnswer } from '../../test/helpers/ports.js'
import { redisCli } from '../../test/helpers/redis.js'
import { EPOCH, GRANT } from '../../src/gateway/limiter/redis/scripts.js'
import { taskset } from './proc-cpu.js'
import { sourceLoaderArgs } from './source-loader.js'
import { parseCommandStats } from './commandstats.js'

export { freePort, redisCli, sourceLoaderArgs }

export const REPO_ROOT = join(import.meta.dirname, '..', '..')
/** The project's tap, as `npm test` runs it (the suite's CPU and flake scripts run it the same way). */
export const TAP_BIN = join(REPO_ROOT, 'node_modules', '.bin', 'tap')
export const DEFAULT_READY_TIMEOUT_MS = 20_000
export const DEFAULT_STOP_TIMEOUT_MS = 15_000
const READY_POLL_MS = 100
/** Limits no bench run reaches: the bench measures the proxy path, not 429s. */
export const UNBOUNDED_LIMITS = { perMinute: 1_000_000_000, perDay: 1_000_000_000_000 } as const


export interface ChildOptions {
  env?: Record<string, string>
  /** The Node binary to run it on; default this process's (process.execPath). */
  node?: string
  /** Extra node flags (e.g. --cpu-prof). */
  nodeArgs?: string[]
  /** 'pipe': the caller reads stdout (a child that prints its ports); default 'ignore' (/dev/null). */
  stdout?: 'pipe' | 'ignore'
  /** Run on these CPUs only (`taskset -c`, e.g. "0"), when taskset is installed; default: inherit. */
  cpus?: string
}

/** `command args` under `taskset -c cpus` when asked and possible (taskset execs: the PID is the command's). */
function pinned (command: string, args: string[], cpus: string | undefined): [string, string[]] {
  const bin = cpus === undefined ? null : taskset()
  return bin === null || cpus === undefined ? [command, args] : [bin, ['-c', cpus, command, ...args]]
}

/** Every child started here, so `stopAll` can end exactly these, by PID. */
const started = new Set<ChildProcess>()

export function startNode (args: string[], opts: ChildOptions = {}): ChildProcess {
  const [command, argv] = pinned(opts.node ?? process.execPath, [...(opts.nodeArgs ?? []), ...sourceLoaderArgs(args[0]!), ...args], opts.cpus)
  const child = spawn(command, argv, {
    cwd: REPO_ROOT,
    env: { ...process.env, ...opts.env },
    stdio: ['ignore', opts.stdout ?? 'ignore', 'inherit']
  })
  started.add(child)
  child.once('exit', () => started.delete(child))
  return child
}

export function startProcess (command: string, args: string[], cwd: string, cpus?: string): ChildProcess {
  const [bin, argv] = pinned(command, args, cpus)
  const child = spawn(bin, argv, { cwd, stdio: 'ignore' })
  started.add(child)
  child.once('exit', () => started.delete(child))
  return child
}

export async function firstLine (child: ChildProcess): Promise<string> {
  if (child.stdout === null) throw new Error('child has no stdout')
  const lines = createInterface({ input: child.stdout })
  return await new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`child exited with ${code} before it was ready`)))
    lines.once('line', resolve)
  })
}

/** SIGTERM to one child, SIGKILL if it has not exited within the bound. */
export async function stop (child: ChildProcess, timeoutMs = DEFAULT_STOP_TIMEOUT_MS): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  await new Promise<void>((resolve) => {
    const timer = setTimeout(() => { child.kill('SIGKILL') }, timeoutMs)
    child.once('exit', () => { clearTimeout(timer); resolve() })
    child.kill('SIGTERM')
  })
}

export async function stopAll (): Promise<void> {
  await Promise.all([...started].map(async (child) => { await stop(child) }))
}

/** The real backend entry point on a free loopback port, its SQLite file in `dir`; resolves to its URL once it answers. */
export async function startBackend (dir: string): Promise<{ url: string, child: ChildProcess }> {
  const port = await freePort()
  const child = startNode([join(REPO_ROOT, 'src', 'backend', 'server.ts')], {
    env: { BACKEND_HOST: '127.0.0.1', BACKEND_PORT: String(port), PETS_DB: join(dir, 'pets.db'), LOG_LEVEL: 'warn' }
  })
  const url = `http://127.0.0.1:${port}`
  await waitForHttp(`${url}/v1/pets`)
  return { url, child }
}

/** Waits until `url` answers below 500 (a 404 is an answer: the server is up). */
export async function waitForHttp (url: string, timeoutMs = DEFAULT_READY_TIMEOUT_MS): Promise<void> {
  await waitForAnswer(url, timeoutMs, (status) => status < 500, READY_POLL_MS)
}

// ---------------------------------------------------------------------------------------------
// Redis

export interface RedisServer { port: number, url: string, child: ChildProcess, cli: (...args: string[]) => Promise<string> }


export async function startRedis (dir: string): Promise<RedisServer> {
  const port = await freePort()
  const child = startProcess('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'], dir)
  await until(`redis-server :${port}`, async () => (await redisCli(port, 'PING')) === 'PONG', DEFAULT_READY_TIMEOUT_MS, READY_POLL_MS)
  return { port, url: `redis://127.0.0.1:${port}`, child, cli: (...args) => redisCli(port, ...args) }
}

/**
 * Commands that the scripts on the measured path run inside Redis (ours: the limiter's lua/*.lua;
 * @fastify/rate-limit's: INCR/PEXPIRE/PTTL/GET). Redis counts those in commandstats and in
 * total_commands_processed alike, so the commands a client sent over the network are the calls of
 * every other command (EVALSHA included). A client command of the same name would be missed: none
 * is sent on the request path of either (the limiter's hot path is EVALSHA only, by design).
 */
export function scriptInnerCommands (): Set<string> {
  const sources = [
    GRANT.lua,
    EPOCH.lua,
    readFileSync(join(REPO_ROOT, 'node_modules', '@fastify', 'rate-limit', 'store', 'RedisStore.js'), 'utf8')
  ]
  const names = new Set<string>()
  for (const text of sources) for (const m of text.matchAll(/redis\.p?call\(\s*'([A-Za-z]+)'/g)) names.add((m[1] ?? '').toLowerCase())
  return names
}

export interface CommandStats { calls: Map<string, number>, usec: Map<string, number>, total: number }

/** `INFO commandstats` as command → calls and µs of Redis CPU, and `total_commands_processed` (which counts scripts' inner calls too). */
export async function commandCalls (redis: RedisServer): Promise<CommandStats> {
  const info = await redis.cli('INFO', 'commandstats')
  const stats = await redis.cli('INFO', 'stats')
  const parsed = parseCommandStats(info)
  const calls = new Map([...parsed].map(([name, stat]) => [name, stat.calls]))
  const usec = new Map([...parsed].map(([name, stat]) => [name, stat.usec]))
  return { calls, usec, total: Number(/total_commands_processed:(\d+)/.exec(stats)?.[1] ?? NaN) }
}

export interface CommandDelta {
  /** Calls per command as commandstats counts them (scripts' inner calls included). */
  calls: Record<string, number>
  /** Commands clients sent (see scriptInnerCommands). */
  sent: number
  /** µs of Redis CPU (commandstats usec; a script's usec includes its inner calls, which are not added again). */
  usec: number
}

/** Calls, client-sent commands and Redis CPU between two readings (the INFO calls left out). */
export function commandDelta (before: CommandStats, after: CommandStats, inner = scriptInnerCommands()): CommandDelta {
  const calls: Record<string, number> = {}
  let usec = 0
  let sent = 0
  for (const [name, n] of after.calls) {
    if (name === 'info') continue
    const d = n - (before.calls.get(name) ?? 0)
    if (d <= 0) continue
    calls[name] = d
    if (!inner.has(name)) {
      sent += d
      usec += (after.usec.get(name) ?? 0) - (before.usec.get(name) ?? 0)
    }
  }
  return { calls, sent, usec }
}

// ---------------------------------------------------------------------------------------------
// Config

/** plans.yaml and routes.yaml of the repository, and one enterprise key whose limits never bind. */
export function writeSingleKeyConfig (dir = mkdtempSync(join(tmpdir(), 'petstore-bench-config-'))): { dir: string, key: string } {
  const key = `psk_bench_${randomBytes(16).toString('hex')}`
  for (const file of ['plans.yaml', 'routes.yaml']) copyFileSync(join(REPO_ROOT, 'config', file), join(dir, file))
  writeFileSync(join(dir, 'keys.yaml'), [
    'keys:',
    '  - id: bench',
    `    sha256: ${createHash('sha256').update(key).digest('hex')}`,
    '    plan: enterprise',
    `    limits: { perMinute: ${UNBOUNDED_LIMITS.perMinute}, perDay: ${UNBOUNDED_LIMITS.perDay} }`,
    ''
  ].join('\n'))
  return { dir, key }
}

/** Rewrites plans.yaml of a config dir so that no plan's limits bind during a bench. */
export function unboundPlans (dir: string): void {
  const limits = `{ perMinute: ${UNBOUNDED_LIMITS.perMinute}, perDay: ${UNBOUNDED_LIMITS.perDay} }`
  writeFileSync(join(dir, 'plans.yaml'), [
    'plans:',
    `  free: ${limits}`,
    `  pro: ${limits}`,
    `  business: ${limits}`,
    '  enterprise: { custom: true }',
    'anonymous: { perMinute: 30, perDay: 300 }',
    'ban: { threshold: 30, windowSeconds: 60, durationSeconds: 900, maxDurationSeconds: 86400 }',
    ''
  ].join('\n'))
}
