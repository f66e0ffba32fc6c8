// buildBackend: the Pet Store backend as a Fastify instance that does not listen, so tests and the
// server entry build it the same way. It owns its SQLite store and closes it with the app.
import { randomUUID } from 'node:crypto'
import Fastify, { LogController } from 'fastify'
import type { FastifyInstance, FastifyRequest, FastifySchemaValidationError, FastifyServerOptions } from 'fastify'
import type { IncomingMessage } from 'node:http'
import { backendErrors, installErrorHandling } from '../interface/errors.js'
import { ordersRoutes } from './routes/orders.js'
import { petsRoutes } from './routes/pets.js'
import { errorBodySchema, interfaceSchemas, MAX_NAME_LENGTH } from '../interface/schemas.js'
import { UNMATCHED_ROUTE } from '../shared/labels.js'
import type { TracingSettings } from '../shared/tracing/settings.js'
import { openStore } from './store.js'
import { backendTracing, childLoggerWithTraceId, tracedStatements, tracingEnabled } from './tracing.js'

export const DEFAULT_BODY_LIMIT = 16 * 1024
const MAX_REQUEST_ID_LENGTH = 128
const REQUEST_ID = new RegExp(`^[\\x21-\\x7e]{1,${MAX_REQUEST_ID_LENGTH}}$`)

export interface BackendOptions {
  dbPath: string
  logger?: FastifyServerOptions['logger'] | boolean
  bodyLimit?: number
  /** OTLP export (docs/tracing.md); absent or without an endpoint: no spans (the trace id is logged either way). */
  tracing?: TracingSettings
  /** How long a plugin may take to start (Fastify's pluginTimeout; default its 10 s): tests raise it, the tracing plugin missed 10 s at load 30. */
  pluginTimeoutMs?: number
}

/** Keeps the gateway's request id so both services log the same one; printable ASCII only, else a new id. */
function requestIdOf (req: IncomingMessage): string {
  const header = req.headers['x-request-id']
  return typeof header === 'string' && REQUEST_ID.test(header) ? header : randomUUID()
}

/**
 * The client a request is for, for the request log: the first `X-Forwarded-For` entry, which the
 * gateway writes as the client address it decided (and counted), else the socket's peer. The backend
 * listens where only the gateway reaches it (docs/decisions.md §1), so the header is the gateway's.
 */
export function clientOf (request: FastifyRequest): string {
  const header = request.headers['x-forwarded-for']
  const first = (Array.isArray(header) ? header[0] : header)?.split(',', 1)[0]?.trim()
  return first === undefined || first === '' ? request.ip : first
}

/** Fastify's wording, except for the name pattern, whose regular expression would tell a client nothing. */
function formatSchemaErrors (errors: FastifySchemaValidationError[], dataVar: string): Error {
  const text = errors.map((e) => e.keyword === 'pattern' && e.instancePath === '/name'
    ? `${dataVar}/name must be 1-${MAX_NAME_LENGTH} characters after trimming, without control characters`
    : `${dataVar}${e.instancePath} ${e.message ?? 'is invalid'}`)
  return new Error(text.join(', '))
}

/**
 * Ajv coerces the text "1e400" (or "Infinity") to Infinity and then skips minimum/maximum for non-finite
 * numbers, so out-of-range path and query integers would pass validation. This closes that gap.
 */
async function rejectNonFiniteNumbers (request: FastifyRequest): Promise<void> {
  for (const [part, values] of [['params', request.params], ['querystring', request.query]] as const) {
    if (typeof values !== 'object' || values === null) continue
    for (const [name, value] of Object.entries(values)) {
      if (typeof value === 'number' && !Number.isFinite(value)) {
        throw backendErrors.notFinite(part, name)
      }
    }
  }
}

export function buildBackend (options: BackendOptions): FastifyInstance {
  const app = Fastify({
    logger: options.logger ?? false,
    // Fastify's own pair of lines ("incoming request", "request completed") is replaced by one line
    // per request written on response, shaped like the gateway's.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: options.bodyLimit ?? DEFAULT_BODY_LIMIT,
    requestIdHeader: false,
    genReqId: requestIdOf,
    childLoggerFactory: childLoggerWithTraceId,
    schemaErrorFormatter: formatSchemaErrors,
    ajv: { customOptions: { removeAdditional: false, coerceTypes: true, useDefaults: true, allErrors: false } },
    ...(options.pluginTimeoutMs === undefined ? {} : { pluginTimeout: options.pluginTimeoutMs })
  })

  const statements = tracingEnabled(options.tracing) ? tracedStatements() : undefined
  const store = openStore(options.dbPath, { wrapStatement: statements?.wrap })
  app.addHook('onClose', async function closeStore () {
    store.close()
  })
  app.addHook('preHandler', rejectNonFiniteNumbers)
  app.addHook('onRequest', async function echoRequestId (request, reply) {
    reply.header('x-request-id', request.id)
  })
  app.addHook('onResponse', async function logRequest (request, reply) {
    request.log.info({
      client: clientOf(request),
      method: request.method,
      route: request.routeOptions.url ?? UNMATCHED_ROUTE,
      status: reply.statusCode,
      durationMs: Math.round(reply.elapsedTime * 100) / 100
    }, 'request')
  })

  // JSON only: without this, Fastify would parse text/plain bodies and answer 400 instead of 415.
  app.removeContentTypeParser('text/plain')

  installErrorHandling(app)
  app.addSchema(errorBodySchema)
  for (const schema of interfaceSchemas) app.addSchema(schema)

  if (statements !== undefined) app.register(backendTracing, { settings: options.tracing, statements })
  app.register(petsRoutes, { store })
  app.register(ordersRoutes, { store })
  return app
}
