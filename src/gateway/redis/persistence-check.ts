// The gateway tells when what it bills would not survive a Redis restart: at start it reads each
// master's persistence (persistence.ts) and, when month quotas or overage are configured on a Redis
// that keeps nothing, logs a warning and shows it in /readyz (check `persistence`). Like the
// maxmemory-policy warning (limiter/store-health.ts) it never fails readiness: the Redis answers,
// requests are served and counted correctly until it restarts, and taking every gateway out of
// service over a Redis setting would turn a billing risk into an outage. The config in force is
// compared at every /readyz and every DEFAULT_PERSISTENCE_RECHECK_MS: a new one (a reload that gives
// a plan perMonth, or removes the last) is judged at once and Redis is read again for it. Redis is
// read at start, for each new config, and until it has answered — never on a timer of its own, so a
// gateway that runs sends Redis nothing more than its requests need.
import fp from 'fastify-plugin'
import type { ConfigSnapshot } from '../config/types.js'
import type { ReadinessRegistry } from '../runtime/readiness.js'
import { describeRedis, type RedisSettings } from './connection.js'
import { persistenceNeeds, persistenceWarning, readPersistence, type PersistenceReading } from './persistence.js'

/** How often the config in force is compared with the one last judged (no Redis call unless it changed). */
export const DEFAULT_PERSISTENCE_RECHECK_MS = 10_000
/** A reading's bound on connecting and on each CONFIG GET (below /readyz's own bound of 1 s). */
export const DEFAULT_PERSISTENCE_READ_TIMEOUT_MS = 500

export interface PersistenceCheckOptions {
  /** The limiter's store settings: the Redis the month and the history are counted in. None: no check (the in-process store). */
  settings?: RedisSettings | undefined
  readiness: ReadinessRegistry
  recheckMs?: number
  readTimeoutMs?: number
}

/** Some master's CONFIG could not be read while the config needs persistence. */
function unverified (evaluation: Evaluation): boolean {
  return evaluation.needs.length > 0 && evaluation.reading.state === 'read' && evaluation.reading.nodes.some((n) => n.mode === 'unknown')
}

interface Evaluation {
  readonly snapshot: ConfigSnapshot
  readonly needs: readonly string[]
  readonly reading: PersistenceReading
  readonly warning: string | undefined
}

/** What /readyz shows of a reading: each master's mode (`aof everysec`, `rdb`, `none`, `unknown: …`), or why none was read. */
function readingDetail (reading: PersistenceReading): Record<string, string> | string {
  if (reading.state === 'unreachable') return `not read: ${reading.reason}`
  return Object.fromEntries(reading.nodes.map((n) => [n.node,
    n.mode === 'unknown' ? `unknown: ${n.reason}` : n.mode === 'aof' ? `aof ${n.appendfsync ?? ''}`.trim() : n.mode]))
}

export const persistenceCheckPlugin = fp<PersistenceCheckOptions>(async function persistenceCheckPlugin (app, opts) {
  const settings = opts.settings
  if (settings === undefined || describeRedis(settings).kind === 'memory') return
  const store = describeRedis(settings)
  const readTimeoutMs = opts.readTimeoutMs ?? DEFAULT_PERSISTENCE_READ_TIMEOUT_MS
  let reading: PersistenceReading = { state: 'unreachable', reason: 'not read yet' }
  let last: Evaluation | undefined
  let pending: Promise<void> | undefined

  /** Tells the log what changed: a warning that appears (or changes), one that clears, a Redis whose CONFIG cannot be read. */
  function tell (before: Evaluation | undefined, now: Evaluation): void {
    const details = { store, needs: now.needs, redis: readingDetail(now.reading) }
    if (now.warning !== undefined && now.warning !== before?.warning) app.log.warn(details, now.warning)
    else if (now.warning === undefined && before?.warning !== undefined) app.log.info(details, 'Redis persistence: the earlier warning no longer applies')
    if (unverified(now) && (before === undefined || !unverified(before))) {
      app.log.info(details, 'Redis persistence cannot be read (CONFIG renamed or denied): make sure Redis keeps month quotas and overage across a restart (appendonly yes)')
    }
  }

  /** The config in force judged against the latest reading, synchronously (no Redis call); logged when it changed. */
  function judge (): Evaluation {
    const snapshot = app.gatewayConfig.current
    if (last !== undefined && last.snapshot === snapshot && last.reading === reading) return last
    const needs = last?.snapshot === snapshot ? last.needs : persistenceNeeds(snapshot)
    const next: Evaluation = { snapshot, needs, reading, warning: persistenceWarning(needs, reading) }
    tell(last, next)
    last = next
    return next
  }

  /**
   * Reads Redis again (one reading at a time), then judges. A Redis that does not answer keeps the
   * last reading it gave (its settings did not change by going away), so an outage neither clears
   * nor repeats the warning.
   */
  async function reread (): Promise<void> {
    pending ??= readPersistence(settings ?? {}, readTimeoutMs)
      .then((read) => {
        if (read.state === 'read' || reading.state === 'unreachable') reading = read
        judge()
      })
      .catch((err: unknown) => { app.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'Redis persistence: reading failed') })
      .finally(() => { pending = undefined })
    await pending
  }

  /** Judges the config in force now; reads Redis again in the background for a new config, or one never answered. */
  function recheck (): Evaluation {
    const changed = last !== undefined && last.snapshot !== app.gatewayConfig.current
    const now = judge()
    if (changed || now.reading.state === 'unreachable') void reread()
    return now
  }

  await reread()
  const timer = setInterval(recheck, opts.recheckMs ?? DEFAULT_PERSISTENCE_RECHECK_MS)
  timer.unref()
  app.addHook('onClose', async () => { clearInterval(timer) })

  // Never rejects and never waits for Redis: the reason is shown beside `ok: true`.
  opts.readiness.register('persistence', async () => {
    const now = recheck()
    return {
      needs: now.needs.length === 0 ? 'nothing billed (no perMonth)' : now.needs,
      redis: readingDetail(now.reading),
      ...(now.warning === undefined ? {} : { warning: now.warning })
    }
  })
}, { name: 'gateway-persistence-check', dependencies: ['gateway-config'] })
