// When `npm start`'s launcher restarts a child that exited on its own, and when it stops trying. A
// crash now and then is restarted quickly; repeated crashes wait longer each time (doubling, capped),
// so a child that fails at once does not spin the CPU; and a child that keeps crashing — a port
// taken by another program, a database it cannot open — is a problem a restart will not fix: after
// `crashLoopCrashes` exits within `crashLoopWindowMs` the launcher gives up and says so. Pure: the
// clock is passed in.
export const DEFAULT_RESTART_DELAY_MS = 250
export const DEFAULT_MAX_RESTART_DELAY_MS = 5_000
export const DEFAULT_CRASH_LOOP_CRASHES = 5
export const DEFAULT_CRASH_LOOP_WINDOW_MS = 60_000

export interface RestartPolicy {
  /** Wait before the first restart; doubled for each further crash within the window. */
  readonly firstDelayMs: number
  readonly maxDelayMs: number
  /** This many exits within the window is a crash loop: no more restarts. */
  readonly crashLoopCrashes: number
  readonly crashLoopWindowMs: number
}

export const DEFAULT_RESTART_POLICY: RestartPolicy = {
  firstDelayMs: DEFAULT_RESTART_DELAY_MS,
  maxDelayMs: DEFAULT_MAX_RESTART_DELAY_MS,
  crashLoopCrashes: DEFAULT_CRASH_LOOP_CRASHES,
  crashLoopWindowMs: DEFAULT_CRASH_LOOP_WINDOW_MS
}

export type RestartDecision =
  | { readonly restart: true, readonly delayMs: number, readonly recentCrashes: number }
  | { readonly restart: false, readonly recentCrashes: number }

/** The recent crashes of one child. */
export class CrashHistory {
  readonly #policy: RestartPolicy
  #crashes: number[] = []

  constructor (policy: RestartPolicy = DEFAULT_RESTART_POLICY) {
    this.#policy = policy
  }

  /** Records a crash at `now` (ms) and says whether to restart, and after how long. */
  record (now: number): RestartDecision {
    const { firstDelayMs, maxDelayMs, crashLoopCrashes, crashLoopWindowMs } = this.#policy
    this.#crashes = this.#crashes.filter((at) => now - at < crashLoopWindowMs)
    this.#crashes.push(now)
    const recentCrashes = this.#crashes.length
    if (recentCrashes >= crashLoopCrashes) return { restart: false, recentCrashes }
    return { restart: true, delayMs: Math.min(maxDelayMs, firstDelayMs * 2 ** (recentCrashes - 1)), recentCrashes }
  }
}
