// buildGateway: the public gateway as a Fastify instance, never listening (server.ts does that,
// tests build it with options). Plugins are registered in the order of the request pipeline:
// client address → tracing (server span, trace id of the log lines) → config snapshot (and, from a
// config directory, its first load) → screen (malformed URL, doubled Authorization) → authenticate →
// shed load (503 when the gateway is over capacity) → limit (inside its span; each consumer's decision
// counted for its usage history) → 400 for what was screened → require a key (401) → route (404/405)
// → lifecycle → edge checks (413/415, by Fastify's body parsing) → proxy. Webhooks note each
// decision on the response and do the rest in the background (webhooks/plugin.ts). The connection caps watch
// the listener beside it (edge/connection-limits.ts).
import { randomUUID } from 'node:crypto'
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import type { LoggerOptions } from 'pino'
import { installErrorHandling } from '../interface/errors.js'
import { authenticate, requireKey } from './auth/plugin.js'
import { clockPlugin, type Clock } from './runtime/clock.js'
import { configPlugin, createConfigHolder, type ConfigHolder } from './config/plugin.js'
import { reloadPlugin, type ReloadOptions } from './config/reload.js'
import { CONFIG_WORKER_START_MARGIN_MS, DEFAULT_CONFIG_PARSE_TIMEOUT_MS } from './config/worker-loader.js'
import type { ConfigSnapshot } from './config/types.js'
import { clientIpPlugin, trustFunction, type TrustProxy } from './edge/client-ip.js'
import { connectionLimitsPlugin } from './edge/connection-limits.js'
import { fastifyLimitOptions, installJsonParser, refuseConnect, serverLimits, type ServerLimits } from './edge/limits.js'
import { rejectScreened, screenRequest } from './edge/request-screen.js'
import { ReadinessRegistry } from './runtime/readiness.js'
import { livenessPlugin, type LivenessOptions } from './runtime/liveness.js'
import { historyPlugin, type HistoryOptions } from './history/plugin.js'
import { lifecyclePlugin } from './lifecycle/plugin.js'
import { loadSheddingPlugin, type LoadSheddingOptions } from './edge/load-shedding.js'
import { limiterPlugin, type LimiterOptions } from './limiter/plugin.js'
import { persistenceCheckPlugin } from './redis/persistence-check.js'
import { metricsPlugin } from './observability/metrics/plugin.js'
import { limiterSpanEnd, limiterSpanStart } from './observability/tracing/limiter-spans.js'
import { tracingPlugin, type TracingOptions } from './observability/tracing/plugin.js'
import { upstreamTimingPlugin } from './observability/metrics/upstream-timing.js'
import { openApiPlugin, type OpenApiPluginOptions } from './openapi/plugin.js'
import { proxyPlugin } from './proxy/plugin.js'
import { lazyChildLoggerFactory, LOG_REDACT_PATHS, requestLogPlugin } from './observability/request-log.js'
import type { RequestLineWriter } from './observability/request-line.js'
import { shutdownPlugin } from './runtime/shutdown.js'
import { webhooksPlugin, type WebhookOptions } from './webhooks/plugin.js'
import { DEFAULT_BODY_LIMIT_BYTES, DEFAULT_UPSTREAM_TIMEOUT_MS, TRUST_PROXY_TRUE_PROBLEM } from './runtime/settings.js'

export { DEFAULT_KEEP_ALIVE_TIMEOUT_MS, DEFAULT_MAX_PARAM_LENGTH, DEFAULT_REQUEST_TIMEOUT_MS } from './edge/limits.js'

/**
 * Where the config comes from: a config directory, loaded at registration and reloaded through the
 * same path (config/reload.ts), or a snapshot fixed for the gateway's life (a holder, for a caller
 * that swaps snapshots itself).
 */
export type GatewayConfigSource =
  | { reload: ReloadOptions, config?: undefined }
  | { config: ConfigSnapshot | ConfigHolder, reload?: undefined }

export interface GatewayOptionsBase {
  backendUrl: string
  /** The upstream budget, end to end (proxy/upstream-gate.ts). */
  upstreamTimeoutMs?: number
  /** Connections to the backend (and requests in flight to it) at most; tests make it small. */
  upstreamConnections?: number
  /** Requests waiting for a backend connection at most. */
  upstreamQueueMax?: number
  bodyLimit?: number
  trustProxy?: TrustProxy
  /** A pino logger, pino options, or false for none. */
  logger?: FastifyBaseLogger | LoggerOptions | false
  /** Log lines the logger's destination lost (observability/log-destination.ts), for gateway_log_lines_dropped_total. */
  logLinesDropped?: () => number
  /** The logger's writer of request lines (observability/request-line.ts): given with the logger createGatewayLogging made. */
  requestLine?: RequestLineWriter
  /** The gateway's one wall clock in Unix ms (limiter windows and bans, sunsets, key expiry); tests inject one. Default Date.now. */
  now?: Clock
  /** Per-request metrics and process metrics; false only for the bench's baseline. Default true. */
  metrics?: boolean
  /** Load shedding at the edge (edge/load-shedding.ts); `{ queueDelayMs: 0 }` turns it off. */
  loadShedding?: LoadSheddingOptions
  /** The limiter's store (or Redis settings to create one); it runs on `now`. Default: in-process store. */
  limiter?: LimiterOptions
  /** Usage history and shadow records (history/plugin.ts): where they live and how often they are written. */
  history?: HistoryOptions
  /** Header/body/time/connection limits of the public listener (edge/limits.ts); tests shorten the timeouts. */
  serverLimits?: Partial<ServerLimits>
  /** The OpenAPI document's servers (public production / staging origins) and docs page. */
  openApi?: OpenApiPluginOptions
  /** The readiness registry the plugins register their checks in; give one to hand it to buildAdmin too. */
  readiness?: ReadinessRegistry
  /** Traces (docs/tracing.md): OTLP export settings and whether a client's trace is continued; default off. */
  tracing?: TracingOptions
  /** Webhook delivery (webhooks/plugin.ts): retry schedule, timeouts, polling; the endpoints come from webhooks.yaml. */
  webhooks?: WebhookOptions
  /** What /healthz counts as wedged (runtime/liveness.ts); tests shorten it. */
  liveness?: LivenessOptions
  /**
   * How long a plugin may take to start, at least (Fastify's pluginTimeout): never less than the config
   * parse's timeout + the worker's start margin. Tests raise it: on a 2-core machine at load 20–30 other
   * plugins (tracing's) took longer than Fastify's 10 s, and the gateway failed to start although nothing was wrong.
   */
  pluginTimeoutMs?: number
}

export type GatewayOptions = GatewayOptionsBase & GatewayConfigSource

function isHolder (config: ConfigSnapshot | ConfigHolder): config is ConfigHolder {
  return 'swap' in config
}

function isLoggerInstance (logger: GatewayOptions['logger']): logger is FastifyBaseLogger {
  return typeof logger === 'object' && typeof (logger as FastifyBaseLogger).child === 'function'
}

export async function buildGateway (options: GatewayOptions): Promise<FastifyInstance> {
  const logger = options.logger ?? false
  const limits = serverLimits(options.serverLimits)
  const trustProxy = options.trustProxy ?? false
  const serverOptions = {
    ...fastifyLimitOptions(limits),
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'reqId' }),
    genReqId: () => randomUUID(),
    childLoggerFactory: lazyChildLoggerFactory,
    bodyLimit: options.bodyLimit ?? DEFAULT_BODY_LIMIT_BYTES,
    // The same trust as the client address (edge/client-ip.ts), for Fastify's host and protocol.
    trustProxy: trustProxy === false ? false : trustFunction(trustProxy),
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    // shutdown.ts answers requests that arrive while closing, in the Error shape.
    return503OnClosing: false,
    // The first config load runs inside a plugin (config/reload.ts), bounded by the parse's own
    // timeout: Fastify's 10 s default stopped a 100,000-key gateway starting on a busy machine.
    pluginTimeout: Math.max(options.pluginTimeoutMs ?? 0, (options.reload?.timeoutMs ?? DEFAULT_CONFIG_PARSE_TIMEOUT_MS) + CONFIG_WORKER_START_MARGIN_MS),
    routerOptions: { maxParamLength: limits.maxParamLength }
  } as const
  const app: FastifyInstance = isLoggerInstance(logger)
    ? Fastify({ ...serverOptions, loggerInstance: logger })
    : Fastify({ ...serverOptions, logger: logger === false ? false : { ...logger, redact: LOG_REDACT_PATHS } })
  // settingsFromEnv refuses it in production; elsewhere (a laptop, a test) it is allowed, loudly.
  if (trustProxy === true) app.log.warn(TRUST_PROXY_TRUE_PROBLEM)
  refuseConnect(app.server)
  installErrorHandling(app)
  // The interface speaks JSON only: any other body type is 415 at the edge.
  app.removeContentTypeParser('text/plain')
  installJsonParser(app)
  app.decorateRequest('routeUrl', null)
  app.addHook('onRequest', function tagRequestId (request, reply, done) {
    reply.header('x-request-id', request.id)
    done()
  })

  const holder = options.config === undefined ? createConfigHolder() : isHolder(options.config) ? options.config : createConfigHolder(options.config)
  const readiness = options.readiness ?? new ReadinessRegistry()
  await app.register(clientIpPlugin, { trustProxy })
  await app.register(tracingPlugin, options.tracing ?? {})
  await app.register(shutdownPlugin, { readiness })
  await app.register(livenessPlugin, { ...options.liveness, readiness })
  await app.register(clockPlugin, { now: options.now })
  await app.register(configPlugin, { holder })
  // The first load of a config directory, before anything that reads the config; it throws the
  // ConfigError of a directory that does not load.
  if (options.reload !== undefined) await app.register(reloadPlugin, options.reload)
  await app.register(screenRequest)
  await app.register(authenticate)
  await app.register(loadSheddingPlugin, { minLimit: options.upstreamConnections, ...options.loadShedding })
  await app.register(limiterSpanStart)
  await app.register(historyPlugin, { ...options.history, settings: options.limiter?.settings })
  await app.register(limiterPlugin, { ...options.limiter, readiness, recorder: app.history.recorder })
  await app.register(persistenceCheckPlugin, { settings: options.limiter?.settings, readiness })
  await app.register(limiterSpanEnd)
  await app.register(rejectScreened)
  await app.register(requireKey)
  await app.register(lifecyclePlugin)
  await app.register(upstreamTimingPlugin)
  await app.register(metricsPlugin, { enabled: options.metrics, logLinesDropped: options.logLinesDropped })
  await app.register(webhooksPlugin, { ...options.webhooks, settings: options.limiter?.settings })
  await app.register(connectionLimitsPlugin, {
    maxConnections: limits.maxConnections,
    maxConnectionsPerClient: limits.maxConnectionsPerClient,
    headTimeoutMs: limits.headTimeoutMs,
    pressureHeadTimeoutMs: limits.pressureHeadTimeoutMs,
    closeAfterRejections: limits.closeAfterRejections,
    trustProxy
  })
  await app.register(requestLogPlugin, { requestLine: options.requestLine })
  await app.register(openApiPlugin, options.openApi ?? {})
  await app.register(proxyPlugin, {
    backendUrl: options.backendUrl,
    upstreamTimeoutMs: options.upstreamTimeoutMs ?? DEFAULT_UPSTREAM_TIMEOUT_MS,
    connections: options.upstreamConnections,
    queueMax: options.upstreamQueueMax,
    readiness
  })
  return app
}
