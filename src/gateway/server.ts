// Entry point of a gateway process: settings from the environment, config from CONFIG_DIR, the
// public and admin listeners, and a graceful stop on SIGTERM/SIGINT (readiness fails first,
// in-flight requests finish within the grace period, then everything closes and the process exits 0).
import '../shared/runtime-guard.js'
import closeWithGrace from 'close-with-grace'
import { buildAdmin } from './admin/app.js'
import { buildGateway } from './app.js'
import { assertNoDemoKeys } from './config/demo-keys.js'
import { ConfigError, loadConfigDir } from './config/loader.js'
import { createConfigHolder } from './config/plugin.js'
import { createGatewayLogger } from './observability/logger.js'
import { ReadinessRegistry } from './runtime/readiness.js'
import { stopGateway } from './runtime/shutdown.js'
import { settingsFromEnv } from './runtime/settings.js'
import { portInUseMessage } from '../shared/port-in-use.js'
import { nonStopSignals, superviseWorkers } from './runtime/workers.js'

/** Time allowed after the drain for closing Redis and the admin listener. */
const CLOSE_MARGIN_MS = 5_000

async function main (): Promise<void> {
  const settings = settingsFromEnv()
  const logger = createGatewayLogger({ level: settings.logLevel, bufferBytes: settings.logBufferBytes })

  let holder
  try {
    const snapshot = loadConfigDir(settings.configDir, { maxBytes: settings.configMaxBytes })
    if (settings.production) assertNoDemoKeys(snapshot)
    holder = createConfigHolder(snapshot)
    logger.info({ configDir: settings.configDir, version: snapshot.version, keys: snapshot.keysByDigest.size, plans: snapshot.plans.size }, 'config loaded')
  } catch (err) {
    if (err instanceof ConfigError) {
      for (const problem of err.problems) logger.fatal(problem)
      logger.flush()
      process.exitCode = 1
      return
    }
    throw err
  }
  // GATEWAY_WORKERS > 1: this process only supervises the workers (after the config proved valid).
  if (superviseWorkers(settings, logger)) return

  const readiness = new ReadinessRegistry()
  const gateway = await buildGateway({
    config: holder,
    backendUrl: settings.backendUrl,
    upstreamTimeoutMs: settings.upstreamTimeoutMs,
    upstreamConnections: settings.upstreamConnections,
    upstreamQueueMax: settings.upstreamQueueMax,
    loadShedding: { queueDelayMs: settings.shedQueueDelayMs },
    bodyLimit: settings.bodyLimit,
    trustProxy: settings.trustProxy,
    logger,
    reload: { dir: settings.configDir, watch: settings.configWatch, production: settings.production, maxBytes: settings.configMaxBytes },
    limiter: { settings },
    openApi: { publicBaseUrl: settings.publicBaseUrl, stagingBaseUrl: settings.stagingBaseUrl },
    readiness
  })
  const admin = await buildAdmin({ gateway, readiness, token: settings.adminToken })
  const store = gateway.limiter.store.describe()
  if (settings.workers > 1 && store.kind === 'memory') logger.warn({ store, workers: settings.workers }, 'limiter store: in-process with GATEWAY_WORKERS > 1 counts per worker')
  else logger.info({ store, leases: store.kind !== 'memory' && settings.storeLeases }, 'limiter store')

  process.on('SIGHUP', () => {
    gateway.configReloader.reload('SIGHUP').catch((err: unknown) => logger.error({ err }, 'config reload failed'))
  })

  // The drain itself is bounded by the grace period (stopGateway cuts what is left); this outer bound
  // only catches a hang in closing Redis or the admin port, and then exits 1.
  const closeBound = settings.shutdownDrainDelayMs + settings.shutdownGraceMs + CLOSE_MARGIN_MS
  closeWithGrace({ delay: closeBound, logger, skip: nonStopSignals() }, async ({ signal, err }) => {
    if (err !== undefined) logger.error({ err }, 'stopping after an unexpected error')
    logger.info({ signal }, 'shutting down: readiness failing, draining in-flight requests')
    await stopGateway(gateway, { readiness, drainDelayMs: settings.shutdownDrainDelayMs, graceMs: settings.shutdownGraceMs, log: logger })
    await admin.close()
    logger.info('stopped')
  })

  for (const [app, host, port, envName] of [[gateway, settings.host, settings.port, 'GATEWAY_PORT'], [admin, settings.adminHost, settings.adminPort, 'ADMIN_PORT']] as const) {
    try {
      await app.listen({ host, port })
    } catch (err) {
      const inUse = portInUseMessage(err, port, envName)
      if (inUse === undefined) throw err
      logger.fatal(inUse)
      process.exit(1)
    }
  }
  logger.info({ public: `${settings.host}:${settings.port}`, admin: `${settings.adminHost}:${settings.adminPort}`, backend: settings.backendUrl }, 'gateway listening')
}

main().catch((err: unknown) => {
  console.error(err)
  process.exit(1)
})
