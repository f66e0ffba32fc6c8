// GATEWAY_WORKERS=N: N gateway processes (Node cluster workers) share the public port, so one host
// uses all its cores. The gateway is stateless — window counters and bans live in Redis — so the
// workers enforce one exact limit between them, as separate pods would. The primary runs no server:
// it forks the workers (each runs the normal entry point, server.ts), replaces a worker that dies
// unexpectedly (giving up on a crash loop), forwards SIGHUP (reload) to every worker, and on
// SIGTERM/SIGINT tells every worker to stop once, waits for them to drain, and exits.
//
// Choices:
// - Without Redis the gateway refuses N > 1: the in-process store would count per worker, so every
//   key would get N times its limit, silently breaking "no over-admission".
// - Each worker's admin listener gets a port of its own, ADMIN_PORT + worker index (0 keeps 0), so
//   Prometheus can scrape each worker's metrics (a shared admin port would answer from whichever
//   worker accepted the connection). /readyz on ADMIN_PORT is worker 0's.
// - Workers ignore SIGINT: a Ctrl-C reaches the whole process group, and a worker that also got the
//   primary's SIGTERM would take it as a second signal and exit without draining. The primary alone
//   turns SIGINT/SIGTERM into exactly one SIGTERM per worker.
import cluster, { type Worker } from 'node:cluster'
import type { Logger } from 'pino'
import type { GatewaySettings } from './settings.js'

/** Wait before replacing a crashed worker. */
export const DEFAULT_RESTART_DELAY_MS = 500
/** More unexpected exits than this within DEFAULT_CRASH_WINDOW_MS: a crash loop, the primary gives up (exit 1). */
export const DEFAULT_MAX_RESTARTS = 10
export const DEFAULT_CRASH_WINDOW_MS = 60_000

/** Redis of any topology is configured: the only store all workers share. */
export function hasSharedStore (settings: Pick<GatewaySettings, 'redisUrl' | 'redisClusterNodes' | 'redisSentinels'>): boolean {
  return settings.redisUrl !== undefined ||
    (settings.redisClusterNodes?.length ?? 0) > 0 ||
    (settings.redisSentinels?.length ?? 0) > 0
}

/**
 * Signals close-with-grace must not take as "stop" in this process: SIGHUP everywhere (it is the
 * config reload, docs/decisions.md §8; close-with-grace would otherwise start a shutdown on it too, and the
 * SIGTERM that follows would count as a second signal and exit 1 without draining), and SIGINT in a
 * worker (see the header).
 */
export function nonStopSignals (): Array<'SIGHUP' | 'SIGINT'> {
  if (!cluster.isWorker) return ['SIGHUP']
  process.on('SIGINT', () => { /* the primary stops this worker with one SIGTERM */ })
  return ['SIGHUP', 'SIGINT']
}

export interface SuperviseOptions {
  restartDelayMs?: number
  maxRestarts?: number
  crashWindowMs?: number
}

/**
 * Called first thing by server.ts. Returns false when this process should run the gateway itself
 * (GATEWAY_WORKERS=1, or this is a worker); true when it is the primary of N workers, which then
 * supervises them until they have stopped and sets the exit code.
 */
export function superviseWorkers (settings: GatewaySettings, logger: Logger, opts: SuperviseOptions = {}): boolean {
  if (settings.workers <= 1 || !cluster.isPrimary) return false
  if (!hasSharedStore(settings)) {
    logger.fatal({ workers: settings.workers },
      'GATEWAY_WORKERS > 1 needs Redis (REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES): with the in-process store each worker would count on its own and admit N times every limit')
    process.exitCode = 1
    return true
  }
  const restartDelayMs = opts.restartDelayMs ?? DEFAULT_RESTART_DELAY_MS
  const maxRestarts = opts.maxRestarts ?? DEFAULT_MAX_RESTARTS
  const crashWindowMs = opts.crashWindowMs ?? DEFAULT_CRASH_WINDOW_MS
  const slots = new Map<Worker, number>()
  const crashes: number[] = []
  let stopping = false
  let failed = false

  function fork (index: number): void {
    const adminPort = settings.adminPort === 0 ? 0 : settings.adminPort + index
    const worker = cluster.fork({ GATEWAY_WORKER_INDEX: String(index), ADMIN_PORT: String(adminPort) })
    slots.set(worker, index)
  }

  function stopAll (signal: string): void {
    if (stopping) return
    stopping = true
    logger.info({ signal, workers: slots.size }, 'stopping every worker')
    for (const worker of slots.keys()) worker.process.kill('SIGTERM')
    if (slots.size === 0) process.exit(failed ? 1 : 0)
  }

  cluster.on('online', (worker) => {
    logger.info({ worker: slots.get(worker), workerPid: worker.process.pid }, 'gateway worker started')
  })
  cluster.on('exit', (worker, code, signal) => {
    const index = slots.get(worker) ?? 0
    slots.delete(worker)
    if (stopping) {
      if (code !== 0) failed = true
      logger.info({ worker: index, workerPid: worker.process.pid, code, signal }, 'gateway worker stopped')
      if (slots.size === 0) {
        logger.info('all workers stopped')
        logger.flush()
        process.exit(failed ? 1 : 0)
      }
      return
    }
    const now = Date.now()
    crashes.push(now)
    while (crashes.length > 0 && (crashes[0] ?? now) < now - crashWindowMs) crashes.shift()
    if (crashes.length > maxRestarts) {
      logger.fatal({ worker: index, code, signal, crashes: crashes.length, windowMs: crashWindowMs }, 'gateway workers keep crashing: stopping')
      failed = true
      stopAll('crash-loop')
      return
    }
    logger.error({ worker: index, workerPid: worker.process.pid, code, signal }, 'gateway worker exited unexpectedly: starting a new one')
    setTimeout(() => { if (!stopping) fork(index) }, restartDelayMs)
  })

  process.on('SIGTERM', () => { stopAll('SIGTERM') })
  process.on('SIGINT', () => { stopAll('SIGINT') })
  process.on('SIGHUP', () => {
    logger.info({ workers: slots.size }, 'SIGHUP: every worker reloads its config')
    for (const worker of slots.keys()) worker.process.kill('SIGHUP')
  })

  logger.info({ workers: settings.workers, port: settings.port }, 'starting gateway workers')
  for (let i = 0; i < settings.workers; i++) fork(i)
  return true
}
