// Runs the project's entry points as real child processes (as a deployment does), collecting their
// output and stopping them in teardown.
import { spawn, type ChildProcess } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { Test } from 'tap'
import { diagnoseChild, reportNodeArgs } from './child-diagnosis.js'
import { until } from './poll.js'
import { answersHttp, freePort, PROCESS_START_TIMEOUT_MS } from './ports.js'

export const REPO_ROOT = join(import.meta.dirname, '..', '..')

/**
 * The Node arguments that run the TypeScript sources as tap runs the tests: Node 22's own type
 * stripping (on by default since 22.18; the flag keeps an older 22 working) and the resolve hook
 * that maps a source's `./x.js` import to `./x.ts` (src/ts-resolve.ts, what package.json's "tap"
 * `node-arg` preloads). No tsx in the child: with tap's process-info hook (CHILD_ENV) it cost
 * about 1 s of CPU more per gateway process start and 0.5 s per CLI command (docs/development.md).
 * The hook is named by absolute URL, so a child started in another directory finds it.
 */
export const TS_NODE_ARGS: readonly string[] = ['--experimental-strip-types', '--import', pathToFileURL(join(REPO_ROOT, 'src', 'ts-resolve.ts')).href]

/** `options` (a NODE_OPTIONS value) without the `--import` of tap's process-info hook. */
export function withoutProcessInfo (options: string): string {
  return options.replace(/"?--import[= ]\S*@tapjs\/processinfo\S*?"?(?=\s|$)/g, '').replace(/\s+/g, ' ').trim()
}

/**
 * Environment for entry points run as child processes. They collect no coverage: the processes
 * whose lines they would add are the ones a test starts as a deployment would, and V8's coverage in
 * each of them would cost CPU at every start for lines the in-process tests already count.
 */
// PLUGIN_TIMEOUT_MS: a gateway process's plugins get as long to start as tests give the process
// (ports.ts PROCESS_START_TIMEOUT_MS): at load 20–30 its config reload plugin missed Fastify's 10 s.
// NODE_OPTIONS: tap's, without its process-info hook (@tapjs/processinfo), which every child would
// otherwise load and run (0.1–0.3 s of CPU a start) only to record a process whose coverage is off.
// NODE_COMPILE_CACHE: Node keeps V8's compiled code of every module a child loads (ours and the
// packages') in one directory under the OS's temp dir, shared by every child of every test file, and
// checks each entry against the module's text (a changed file is compiled afresh). Only the children:
// Node warns that the cache makes coverage less precise, and tap's own processes collect it.
export const CHILD_ENV: Readonly<Record<string, string>> = {
  _TAPJS_PROCESSINFO_COVERAGE_: '0',
  NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE ?? join(tmpdir(), 'petstore-gateway-compile-cache'),
  PLUGIN_TIMEOUT_MS: String(PROCESS_START_TIMEOUT_MS),
  NODE_OPTIONS: withoutProcessInfo(process.env.NODE_OPTIONS ?? '')
}

export interface RunningProcess {
  child: ChildProcess
  output: () => string
  exited: Promise<{ code: number | null, signal: NodeJS.Signals | null }>
}

/**
 * Runs `entry` (a path in the checkout at `root`, default this one) on Node's type stripping (TS_NODE_ARGS),
 * able to tell what it was doing if it never answers (child-diagnosis.ts).
 */
export function runEntry (t: Pick<Test, 'teardown'>, entry: string, env: Record<string, string>, root = REPO_ROOT): RunningProcess {
  const child = spawn(process.execPath, [...reportNodeArgs(), ...TS_NODE_ARGS, join(root, entry)], {
    cwd: root,
    env: { ...process.env, ...CHILD_ENV, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let out = ''
  child.stdout?.on('data', (c: Buffer) => { out += c.toString() })
  child.stderr?.on('data', (c: Buffer) => { out += c.toString() })
  const exited = new Promise<{ code: number | null, signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }))
  })
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL')
      await exited
    }
  })
  return { child, output: () => out, exited }
}

/** Pids whose parent is `pid` (from /proc, so it sees processes this test did not spawn itself). */
export function childPids (pid: number): number[] {
  return readdirSync('/proc').filter((name) => /^\d+$/.test(name)).flatMap((name) => {
    try {
      // Field 4 of /proc/<pid>/stat is the parent pid; the command name before it may hold spaces.
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid ? [Number(name)] : []
    } catch {
      return []
    }
  })
}

/** The command line of a running process, or undefined when it is gone (or a zombie). */
export function commandLine (pid: number): string | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/cmdline`, 'utf8')
    return text === '' ? undefined : text.split('\0').join(' ').trim()
  } catch {
    return undefined
  }
}

export interface GatewayProcessOptions {
  port: number
  adminPort: number
  backendUrl: string
  configDir: string
  /** Unset: the in-process store (REDIS_URL is cleared, whatever the test's own environment holds). */
  redisUrl?: string
}

/**
 * The environment of a gateway entry point (src/gateway/server.ts) run by a test: loopback
 * listeners, the given backend, config and Redis, config watching off (tests reload explicitly),
 * load shedding off; `extra` adds or overrides variables.
 */
export function gatewayProcessEnv (opts: GatewayProcessOptions, extra: Record<string, string> = {}): Record<string, string> {
  return {
    GATEWAY_HOST: '127.0.0.1',
    GATEWAY_PORT: String(opts.port),
    ADMIN_PORT: String(opts.adminPort),
    BACKEND_URL: opts.backendUrl,
    CONFIG_DIR: opts.configDir,
    CONFIG_WATCH: 'false',
    REDIS_URL: opts.redisUrl ?? '',
    // As in startGateway: no load shedding unless the test sets it.
    SHED_QUEUE_DELAY_MS: '0',
    ...extra
  }
}

/** A child that exited before it answered, or never answered: the message carries its output and diagnosis. */
export class NotServingError extends Error {
  readonly exited: boolean
  constructor (message: string, exited: boolean) {
    super(message)
    this.exited = exited
  }
}

/**
 * Waits until `proc` answers `url` with a status `accepted` takes. If it exits first, fails at once with its
 * exit and output; if it never answers, with what it was doing then as well (diagnoseChild). Polling stops
 * either way, so no wait outlives the process it was for.
 */
export async function waitForProcessHttp (proc: RunningProcess, url: string, accepted: (status: number) => boolean = () => true, timeoutMs = PROCESS_START_TIMEOUT_MS): Promise<void> {
  let exit: string | undefined
  void proc.exited.then(({ code, signal }) => { exit = `exited (code ${code}, signal ${signal})` })
  try {
    await until(url, async () => {
      if (exit !== undefined) return true
      return await answersHttp(url, accepted)
    }, timeoutMs, 50)
  } catch (err) {
    throw new NotServingError(await notServing(proc, err instanceof Error ? err.message : String(err)), false)
  }
  if (exit !== undefined) throw new NotServingError(await notServing(proc, exit), true)
}

/** The failure of a child that never answered: why, its output's last 2 kB, and its diagnosis if it still runs. */
async function notServing (proc: RunningProcess, why: string): Promise<string> {
  const running = proc.child.exitCode === null && proc.child.signalCode === null
  const diagnosis = running ? await diagnoseChild(proc.child.pid) : 'it is not running'
  return `${why}; its output: ${proc.output().slice(-2_000)}\n${diagnosis}`
}

/**
 * A gateway process (src/gateway/server.ts) on two free ports, ready: `envFor` gives its environment
 * for them. A port another test took between freePort() and the child's listen makes the child exit
 * at start: it is started again on other ports (three tries), and its output is shown if it never comes up.
 */
export async function startGatewayProcess (t: Pick<Test, 'teardown'>, envFor: (port: number, adminPort: number) => Record<string, string>, root = REPO_ROOT): Promise<{ port: number, adminPort: number, proc: RunningProcess }> {
  for (let attempt = 1; ; attempt++) {
    const [port, adminPort] = [await freePort(), await freePort()]
    const proc = runEntry(t, 'src/gateway/server.ts', envFor(port, adminPort), root)
    try {
      await waitForProcessHttp(proc, `http://127.0.0.1:${adminPort}/readyz`, (status) => status === 200)
      return { port, adminPort, proc }
    } catch (err) {
      if (!(err instanceof NotServingError) || !err.exited || attempt === 3) throw err
    }
  }
}
