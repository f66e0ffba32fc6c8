// `npm start`: runs the backend and the gateway as two child processes of one launcher — the way a
// deployment runs them apart, on one machine — and owns their stop order, which a shell or npm
// cannot provide:
// - SIGTERM, SIGINT (Ctrl-C): the gateway is stopped first (it stops accepting and drains the
//   requests in flight, which still need the backend), then the backend; a second signal kills
//   both at once. The children run in process groups of their own, so a Ctrl-C at the terminal
//   reaches only this launcher and the order holds (otherwise the backend would stop with the
//   gateway and the requests being drained would get 502s).
// - SIGHUP: forwarded to the gateway, which reloads its config.
// - A child that exits on its own is restarted (supervisor.ts, restart-policy.ts): a dead backend is
//   exactly what the gateway is there to survive — it answers 502 upstream_unavailable meanwhile and
//   200 again once the backend is back. A child that crashes in a loop stops the launcher: one line
//   says which and why, the other child is stopped, exit 1.
// package.json runs it with `exec`, so the signal npm forwards reaches this process, not a shell.
import '../shared/runtime-guard.js'
import { spawn, type ChildProcess } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { DEFAULT_SHUTDOWN_GRACE_MS } from '../gateway/runtime/settings.js'
import { Supervisor } from './supervisor.js'

/** After the gateway's own bound (drain delay + grace), how long it may take to close before it is killed. */
const CLOSE_MARGIN_MS = 7_000
/** The backend closes SQLite; it has this long after the gateway is gone. */
const BACKEND_STOP_MS = 10_000
/**
 * A Ctrl-C under `npm start` arrives twice at once (from the terminal, and forwarded by npm); a
 * second signal this soon after the first is the same request, not a demand to force.
 */
const SAME_SIGNAL_WINDOW_MS = 500

const here = dirname(fileURLToPath(import.meta.url))
const fromSource = import.meta.url.endsWith('.ts')
const ext = fromSource ? '.ts' : '.js'
const nodeArgs = [
  // From source, each child runs on Node's type stripping with the resolve hook (src/ts-resolve.ts).
  ...(fromSource ? ['--import', pathToFileURL(join(here, '..', 'ts-resolve.ts')).href] : []),
  '--import', pathToFileURL(join(here, `exit-with-parent${ext}`)).href
]

function msFromEnv (name: string, fallback: number): number {
  const value = Number(process.env[name])
  return process.env[name] !== undefined && process.env[name] !== '' && Number.isFinite(value) && value >= 0 ? value : fallback
}

// On one machine there is no load balancer to take the gateway out of rotation first.
const env = { ...process.env, SHUTDOWN_DRAIN_DELAY_MS: process.env.SHUTDOWN_DRAIN_DELAY_MS ?? '0' }
const gatewayStopMs = msFromEnv('SHUTDOWN_DRAIN_DELAY_MS', 0) + msFromEnv('SHUTDOWN_GRACE_MS', DEFAULT_SHUTDOWN_GRACE_MS) + CLOSE_MARGIN_MS

let stopping = false
let forcedAt: number | undefined
let firstSignalAt = 0

function spawnChild (file: string): ChildProcess {
  // detached: a process group of its own, out of reach of the terminal's Ctrl-C (see above).
  return spawn(process.execPath, [...nodeArgs, join(here, '..', file + ext)], { stdio: 'inherit', env, detached: true })
}

function onGiveUp (line: string): void {
  console.error(`${line}: stopping`)
  void stop(1)
}

const log = (line: string): void => { console.error(line) }
const backend = new Supervisor({ name: 'backend', start: () => spawnChild('backend/server'), log, onGiveUp })
const gateway = new Supervisor({ name: 'gateway', start: () => spawnChild('gateway/server'), log, onGiveUp })

async function stop (exitCode: number): Promise<void> {
  if (stopping) return
  stopping = true
  process.exitCode = exitCode
  // Neither child is restarted from here on, whichever exits first.
  backend.stopRestarting()
  gateway.stopRestarting()
  const gatewayClean = await gateway.stop(gatewayStopMs)
  const backendClean = await backend.stop(BACKEND_STOP_MS)
  if (!gatewayClean || !backendClean) process.exitCode = 1
}

function onStopSignal (signal: NodeJS.Signals): void {
  const now = Date.now()
  if (!stopping) {
    firstSignalAt = now
    console.error(`${signal}: stopping the gateway (draining requests in flight), then the backend`)
    void stop(0)
    return
  }
  if (now - firstSignalAt < SAME_SIGNAL_WINDOW_MS || forcedAt !== undefined) return
  forcedAt = now
  console.error(`second ${signal}: killing the gateway and the backend`)
  process.exitCode = 1
  gateway.kill()
  backend.kill()
}

process.on('SIGTERM', onStopSignal)
process.on('SIGINT', onStopSignal)
process.on('SIGHUP', () => { gateway.signal('SIGHUP') })
