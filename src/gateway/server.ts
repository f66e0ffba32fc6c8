// Entry point of a gateway process: settings from the environment, the gateway (whose first config
// load from CONFIG_DIR must succeed), the public and admin listeners, and a graceful stop on
// SIGTERM/SIGINT (readiness fails first, in-flight requests finish within the grace period, then
// everything closes and the process exits 0).
import '../shared/runtime-guard.js'
import cluster from 'node:cluster'
import closeWithGrace from 'close-with-grace'
import type { Logger } from 'pino'
import { buildAdmin } from './admin/app.js'
import { isAdminHost } from './admin/request-guard.js'
import { buildGateway } from './app.js'
import { ConfigError } from './config/loader.js'
import { DEFAULT_LISTEN_BACKLOG } from './edge/limits.js'
import { loadConfigOnce } from './config/provider.js'
import type { ReloadOptions } from './config/reload.js'
import { createGatewayLogging } from './observability/logger.js'
import { ReadinessRegistry } from './runtime/readiness.js'
import { stopGateway } from './runtime/shutdown.js'
import { settingsFromEnv } from './runtime/settings.js'
import { webhookSettingsFromEnv } from './webhooks/settings.js'
import { portInUseMessage } from '../shared/port-in-use.js'
import { nonStopSignals, superviseWorkers } from './runtime/workers.js'

/** Time allowed after the drain for closing Redis and the admin listener. */
const CLOSE_MARGIN_MS = 5_000

/** A config that does not load stops the process: one line per problem, exit code 1. False for any other error. */
function refusedConfig (err: unknown, logger: Logger): boolean {
  if (!(err instanceof ConfigError)) return false
  for (const problem of err.problems) logger.fatal(problem)
  logger.flush()
  process.exitCode = 1
  return true
}

async function main (): Promise<void> {
  const settings = settingsFromEnv()
  const { logger, linesDropped, requestLine } = createGatewayLogging({ level: settings.logLevel, bufferBytes: settings.logBufferBytes, backlogBytes: settings.logBacklogBytes })
  const config: ReloadOptions = {
    dir: settings.configDir,
    watch: settings.configWatch,
    quietMs: settings.configQuietMs,
    production: settings.production,
    maxBytes: settings.configMaxBytes
  }

  // GATEWAY_WORKERS > 1: this process only supervises the workers, once the config has proved valid
  // (each worker then loads it through its own gateway, as a single process does).
  if (settings.workers > 1 && cluster.isPrimary) {
    try {
      await loadConfigOnce({ ...config, now: Date.now })
    } catch (err) {
      if (refusedConfig(err, logger)) return
      throw err
    }
  }
  if (superviseWorkers(settings, logger)) return

  const readiness = new ReadinessRegistry()
  let gateway
  try {
    // The first config load happens here, through the path every reload takes (config/reload.ts).
    gateway = await buildGateway({
      reload: config,
      backendUrl: settings.backendUrl,
      upstreamTimeoutMs: settings.upstreamTimeoutMs,
      upstreamConnections: settings.upstreamConnections,
      upstreamQueueMax: settings.upstreamQueueMax,
      loadShedding: { queueDelayMs: settings.shedQueueDelayMs, intervalMs: settings.shedIntervalMs },
      bodyLimit: settings.bodyLimit,
      trustProxy: settings.trustProxy,
      serverLimits: {
        maxConnections: settings.maxConnections,
        maxConnectionsPerClient: settings.maxConnectionsPerClient,
        headTimeoutMs: settings.headTimeoutMs,
        pressureHeadTimeoutMs: settings.pressureHeadTimeoutMs,
        pipelineDepth: settings.pipelineDepth
      },
      logger,
      logLinesDropped: linesDropped,
      requestLine,
      limiter: { settings },
      history: { flushMs: settings.historyFlushMs },
      openApi: { publicBaseUrl: settings.publicBaseUrl, stagingBaseUrl: settings.stagingBaseUrl },
      readiness,
      tracing: { settings: settings.tracing, incoming: settings.traceIncoming },
      webhooks: webhookSettingsFromEnv(process.env),
      pluginTimeoutMs: settings.pluginTimeoutMs
    })
  } catch (err) {
    if (refusedConfig(err, logger)) return
    throw err
  }
  const admin = await buildAdmin({ gateway, readiness, token: settings.adminToken, hosts: settings.adminHosts })
  if (settings.adminHosts.length === 0 && !isAdminHost(settings.adminHost.toLowerCase(), new Set())) {
    logger.warn({ adminHost: settings.adminHost }, 'the admin port listens beyond loopback but answers only requests whose Host is localhost or a loopback address (probes excepted): list the names it is reached by in ADMIN_HOSTS')
  }
  const store = gateway.limiter.store.describe()
  if (settings.workers > 1 && store.kind === 'memory') logger.warn({ store, workers: settings.workers }, 'limiter store: in-process with GATEWAY_WORKERS > 1 counts per worker')
  else logger.info({ store }, 'limiter store')

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

  const listeners = [[gateway, settings.host, settings.port, 'GATEWAY_PORT', DEFAULT_LISTEN_BACKLOG], [admin, settings.adminHost, settings.adminPort, 'ADMIN_PORT', undefined]] as const
  for (const [app, host, port, envName, backlog] of listeners) {
    try {
      await app.listen({ host, port, backlog })
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
