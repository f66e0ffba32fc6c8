// One child process of `npm start`'s launcher, kept running: when it exits without being asked to,
// it is started again after the restart policy's delay (each step logged in one line), until it
// crashes in a loop — then `onGiveUp` is told, once, and it stays down. The launcher asks it to
// stop (SIGTERM, then SIGKILL after a bound) or to die at once; from then on nothing restarts it.
import type { ChildProcess } from 'node:child_process'
import { CrashHistory, DEFAULT_RESTART_POLICY, type RestartPolicy } from './restart-policy.js'

export interface SupervisorOptions {
  /** `backend`, `gateway`: how the log lines name the child. */
  name: string
  /** Starts the child (again). */
  start: () => ChildProcess
  log: (line: string) => void
  /** Called once with a one-line reason when the child crashed in a loop; it is not restarted again. */
  onGiveUp: (line: string) => void
  policy?: RestartPolicy
  now?: () => number
}

export function alive (child: ChildProcess): boolean {
  return child.pid !== undefined && child.exitCode === null && child.signalCode === null
}

function exited (child: ChildProcess): Promise<void> {
  if (!alive(child)) return Promise.resolve()
  return new Promise((resolve) => child.once('exit', () => resolve()))
}

export class Supervisor {
  readonly #opts: SupervisorOptions
  readonly #history: CrashHistory
  readonly #now: () => number
  #child: ChildProcess
  #restartTimer: NodeJS.Timeout | undefined
  #restarting = true

  constructor (opts: SupervisorOptions) {
    this.#opts = opts
    this.#history = new CrashHistory(opts.policy ?? DEFAULT_RESTART_POLICY)
    this.#now = opts.now ?? Date.now
    this.#child = this.#spawn()
  }

  /** The child now running, or the last one (exited, between a crash and its restart). */
  get child (): ChildProcess {
    return this.#child
  }

  get running (): boolean {
    return alive(this.#child)
  }

  #spawn (): ChildProcess {
    const child = this.#opts.start()
    let seen = false
    const onEnd = (how: string): void => {
      if (seen) return
      seen = true
      this.#ended(child, how)
    }
    child.once('exit', (code, signal) => onEnd(signal ?? `code ${code ?? '?'}`))
    // A child that could not be started at all emits 'error' and may never emit 'exit'.
    child.once('error', (err) => { if (child.pid === undefined) onEnd(err.message) })
    return child
  }

  #ended (child: ChildProcess, how: string): void {
    if (!this.#restarting || child !== this.#child) return
    const { name } = this.#opts
    const decision = this.#history.record(this.#now())
    if (!decision.restart) {
      this.#restarting = false
      const windowS = (this.#opts.policy ?? DEFAULT_RESTART_POLICY).crashLoopWindowMs / 1000
      this.#opts.onGiveUp(`${name} exited ${decision.recentCrashes} times within ${windowS} s (last: ${how}); not restarting it again`)
      return
    }
    this.#opts.log(`${name} exited (${how}); restarting it in ${decision.delayMs} ms`)
    this.#restartTimer = setTimeout(() => {
      this.#restartTimer = undefined
      if (!this.#restarting) return
      this.#child = this.#spawn()
      this.#opts.log(`${name} restarted (pid ${this.#child.pid ?? 'none'})`)
    }, decision.delayMs)
  }

  /** No restart from now on (a pending one is cancelled); the child, if running, keeps running. */
  stopRestarting (): void {
    this.#restarting = false
    clearTimeout(this.#restartTimer)
    this.#restartTimer = undefined
  }

  /** Sends `signal` to the running child (none between a crash and its restart). */
  signal (signal: NodeJS.Signals): void {
    if (this.running) this.#child.kill(signal)
  }

  /**
   * Stops the child for good: SIGTERM, then SIGKILL if it is still there after `withinMs`. True when
   * it exited with code 0, or was not running.
   */
  async stop (withinMs: number): Promise<boolean> {
    this.stopRestarting()
    const child = this.#child
    if (!alive(child)) return true
    child.kill('SIGTERM')
    const timer = setTimeout(() => { if (alive(child)) child.kill('SIGKILL') }, withinMs)
    await exited(child)
    clearTimeout(timer)
    return child.exitCode === 0
  }

  /** Kills the child at once, for good. */
  kill (): void {
    this.stopRestarting()
    if (this.running) this.#child.kill('SIGKILL')
  }
}
