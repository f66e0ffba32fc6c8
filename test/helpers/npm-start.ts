// `npm start` as a user runs it, for the launcher's tests: the real npm (`npm start` → package.json's
// script → src/cli/start.ts → backend and gateway processes) in a process group of its own (as a
// terminal runs a foreground job), on free loopback ports, its output collected, everything killed
// in teardown.
import { spawn } from 'node:child_process'
import { connect } from 'node:net'
import { dirname, join } from 'node:path'
import type { Test } from 'tap'
import { FIXTURE_CONFIG_DIR } from './config-fixture.js'
import { until } from './poll.js'
import { freePort, PROCESS_START_TIMEOUT_MS, waitForHttp } from './ports.js'
import { childPids, CHILD_ENV, commandLine, REPO_ROOT } from './processes.js'

export interface NpmStart {
  npm: ReturnType<typeof spawn>
  env: Record<string, string>
  /** The gateway's public URL. */
  base: string
  adminUrl: string
  output: () => string
  exited: Promise<{ code: number | null, signal: NodeJS.Signals | null }>
  /** The launcher: the process npm created. */
  launcher: number
  /** Kill `pid` in teardown too (a child that may have outlived the launcher). */
  track: (pid: number) => void
}

export interface Started extends NpmStart {
  gateway: number
  backend: number
}

/** Starts `npm start` and returns at once, without waiting for anything to listen. */
export async function spawnNpmStart (t: Test, extra: Record<string, string> = {}): Promise<NpmStart> {
  const dir = t.testdir()
  const env: Record<string, string> = {
    GATEWAY_HOST: '127.0.0.1',
    GATEWAY_PORT: String(await freePort()),
    ADMIN_PORT: String(await freePort()),
    BACKEND_PORT: String(await freePort()),
    PETS_DB: join(dir, 'pets.db'),
    CONFIG_DIR: FIXTURE_CONFIG_DIR,
    CONFIG_WATCH: 'false',
    SHUTDOWN_GRACE_MS: '2000',
    ...extra
  }
  env.BACKEND_URL = `http://127.0.0.1:${env.BACKEND_PORT}`
  const npm = spawn('npm', ['start', '--silent'], {
    cwd: REPO_ROOT,
    // The node running this test first on PATH: npm runs the script with it.
    env: { ...process.env, ...CHILD_ENV, LOG_LEVEL: 'info', PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}`, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true
  })
  let out = ''
  npm.stdout?.on('data', (c: Buffer) => { out += c.toString() })
  npm.stderr?.on('data', (c: Buffer) => { out += c.toString() })
  const exited = new Promise<{ code: number | null, signal: NodeJS.Signals | null }>((resolve) => {
    npm.once('exit', (code, signal) => resolve({ code, signal }))
  })
  const launcher = await until('the launcher', () => childPids(npm.pid ?? 0)[0])
  const tracked: number[] = []
  t.teardown(async () => {
    // A failed test shows what the launcher and its children printed (a child's crash, a restart) beside its failure.
    if (!t.passing()) process.stderr.write(`npm start's output (the last 8 kB), for the failure of "${t.name}":\n${out.slice(-8_000)}\n`)
    // Whatever the launcher runs now (children restarted since included), then the launcher and npm.
    for (const pid of [...childPids(launcher), ...tracked, launcher, npm.pid ?? 0]) {
      try { process.kill(pid, 'SIGKILL') } catch { /* already gone */ }
    }
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 2000))])
  })
  return {
    npm, env, base: `http://127.0.0.1:${env.GATEWAY_PORT}`, adminUrl: `http://127.0.0.1:${env.ADMIN_PORT}`, output: () => out, exited, launcher,
    track: (pid) => { tracked.push(pid) }
  }
}

/** The launcher's child running `entry` (`gateway/server`, `backend/server`) now, if any. */
export function childRunning (launcher: number, entry: string): number | undefined {
  return childPids(launcher).find((pid) => commandLine(pid)?.includes(entry) === true)
}

/** Starts `npm start` and waits until the gateway's admin port and the backend answer. */
export async function npmStart (t: Test, extra: Record<string, string> = {}): Promise<Started> {
  const s = await spawnNpmStart(t, extra)
  await waitForHttp(`${s.adminUrl}/healthz`, PROCESS_START_TIMEOUT_MS)
  await waitForHttp(`${s.env.BACKEND_URL ?? ''}/v1/pets`, PROCESS_START_TIMEOUT_MS)
  const gateway = childRunning(s.launcher, 'gateway/server')
  const backend = childRunning(s.launcher, 'backend/server')
  if (gateway === undefined || backend === undefined) throw new Error(`launcher children: ${childPids(s.launcher).map((p) => commandLine(p)).join(' | ')}`)
  s.track(gateway)
  s.track(backend)
  return { ...s, gateway, backend }
}

export function alive (pid: number): boolean {
  return commandLine(pid) !== undefined
}

/** Whether something accepts connections on 127.0.0.1:`port`. */
export async function bound (port: string): Promise<boolean> {
  return await new Promise((resolve) => {
    const socket = connect(Number(port), '127.0.0.1')
    socket.once('connect', () => { socket.destroy(); resolve(true) })
    socket.once('error', () => resolve(false))
  })
}
