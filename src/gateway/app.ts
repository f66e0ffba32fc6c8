// buildGateway: the public gateway as a Fastify instance, never listening (server.ts does that,
// tests build it with options). Plugins are registered in the order of the request pipeline:
// config snapshot → authenticate → limit → require a key (401) → route (404/405) → lifecycle
// → edge checks (413/415, by Fastify's body parsing) → proxy.
import { randomUUID } from 'node:crypto'
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import type { LoggerOptions } from 'pino'
import { installErrorHandling } from '../shared/api-error.js'
import { authenticate, requireKey } from './auth/plugin.js'
import { configPlugin, createConfigHolder, type ConfigHolder } from './config/plugin.js'
import type { ConfigSnapshot } from './config/types.js'
import { healthPlugin } from './health.js'
import { proxyPlugin } from './proxy/plugin.js'
import { LOG_REDACT_PATHS, requestLogPlugin } from './request-log.js'
import { DEFAULT_BODY_LIMIT_BYTES, DEFAULT_UPSTREAM_TIMEOUT_MS } from './settings.js'

export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000
export const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 72_000
export const DEFAULT_MAX_PARAM_LENGTH = 100

export interface GatewayOptions {
  /** A snapshot (fixed config) or a holder whose snapshot a reloader swaps. */
  config: ConfigSnapshot | ConfigHolder
  backendUrl: string
  upstreamTimeoutMs?: number
  bodyLimit?: number
  trustProxy?: boolean | number | string
  /** A pino logger, pino options, or false for none. */
  logger?: FastifyBaseLogger | LoggerOptions | false
}

function isHolder (config: ConfigSnapshot | ConfigHolder): config is ConfigHolder {
  return 'swap' in config
}

function isLoggerInstance (logger: GatewayOptions['logger']): logger is FastifyBaseLogger {
  return typeof logger === 'object' && typeof (logger as FastifyBaseLogger).child === 'function'
}

/** Fastify takes a hop count at run time but its types do not: pass it as the equivalent function. */
function trustProxyOption (trust: GatewayOptions['trustProxy']): boolean | string | ((address: string, hop: number) => boolean) {
  if (typeof trust === 'number') return (_address, hop) => hop < trust
  return trust ?? false
}

export async function buildGateway (options: GatewayOptions): Promise<FastifyInstance> {
  const logger = options.logger ?? false
  const serverOptions = {
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'reqId' }),
    genReqId: () => randomUUID(),
    bodyLimit: options.bodyLimit ?? DEFAULT_BODY_LIMIT_BYTES,
    trustProxy: trustProxyOption(options.trustProxy),
    requestTimeout: DEFAULT_REQUEST_TIMEOUT_MS,
    keepAliveTimeout: DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    return503OnClosing: true,
    routerOptions: { maxParamLength: DEFAULT_MAX_PARAM_LENGTH }
  } as const
  const app: FastifyInstance = isLoggerInstance(logger)
    ? Fastify({ ...serverOptions, loggerInstance: logger })
    : Fastify({ ...serverOptions, logger: logger === false ? false : { ...logger, redact: LOG_REDACT_PATHS } })
  installErrorHandling(app)
  // The interface speaks JSON only: any other body type is 415 at the edge.
  app.removeContentTypeParser('text/plain')
  app.addHook('onRequest', function tagRequestId (request, reply, done) {
    reply.header('x-request-id', request.id)
    done()
  })

  const holder = isHolder(options.config) ? options.config : createConfigHolder(options.config)
  await app.register(healthPlugin)
  await app.register(configPlugin, { holder })
  await app.register(authenticate)
  await app.register(requireKey)
  await app.register(requestLogPlugin)
  await app.register(proxyPlugin, {
    backendUrl: options.backendUrl,
    upstreamTimeoutMs: options.upstreamTimeoutMs ?? DEFAULT_UPSTREAM_TIMEOUT_MS
  })
  return app
}
