// The error catalogue of the interface: every error either service answers (the gateway, its admin
// app, the Pet Store backend), defined once with its status, code and message, and the one place that
// renders the Error shape ({code, message, status}) and turns any thrown error (ours, Fastify's
// validation or body-parsing errors, anything unexpected) into it. Both services install
// `installErrorHandling`; hooks and routes throw entries of the catalogue.
import { STATUS_CODES } from 'node:http'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify'
import type { ErrorBody } from './schemas.js'

/**
 * An error answered to the client. It carries no stack trace: none is ever sent or logged (the error
 * handler logs only unexpected errors), and capturing one cost more than the rest of a 429's work —
 * a flood of rejected requests is exactly when that matters.
 */
export class ApiError extends Error {
  readonly status: number
  readonly code: string
  readonly headers: Readonly<Record<string, string>> | undefined

  constructor (status: number, code: string, message: string, headers?: Record<string, string>) {
    const stackTraceLimit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    super(message)
    Error.stackTraceLimit = stackTraceLimit
    this.name = 'ApiError'
    this.status = status
    this.code = code
    this.headers = headers
  }

  get body (): ErrorBody {
    return { code: this.code, message: this.message, status: this.status }
  }
}

const REALM = 'Bearer realm="petstore"'

/** Errors of the request itself, which both services answer the same way. */
export const requestErrors = {
  routeNotFound: (method: string, path: string) => new ApiError(404, 'route_not_found', `No route ${method} ${path}`),
  methodNotAllowed: (method: string, url: string, allow: string) =>
    new ApiError(405, 'method_not_allowed', `Method ${method} is not allowed on ${url}`, { allow }),
  /** Fastify's schema validation of a body, or of the params / querystring / headers. */
  invalid: (where: 'invalid_body' | 'invalid_parameter', message: string) => new ApiError(400, where, message),
  invalidParameter: (message: string) => new ApiError(400, 'invalid_parameter', message),
  invalidBody: (message: string) => new ApiError(400, 'invalid_body', message),
  notJson: (detail: string) => new ApiError(400, 'invalid_body', `Request body is not valid JSON: ${detail}`),
  payloadTooLarge: () => new ApiError(413, 'payload_too_large', 'Request body is larger than the limit'),
  unsupportedMediaType: () => new ApiError(415, 'unsupported_media_type', 'Request body must be application/json'),
  internal: () => new ApiError(500, 'internal_error', 'The server could not complete the request')
} as const

/** The Pet Store backend's own errors. */
export const backendErrors = {
  petNotFound: (petId: number) => new ApiError(404, 'not_found', `Pet ${petId} not found`),
  invalidCursor: () => requestErrors.invalidParameter('querystring/cursor is not a valid cursor'),
  notFinite: (part: string, name: string) => requestErrors.invalidParameter(`${part}/${name} must be a finite integer`),
  mistypedField: (field: string, type: string) => requestErrors.invalidBody(`body/${field} must be ${type}`)
} as const

/** Every error the gateway itself answers on its public port. */
export const gatewayErrors = {
  missingKey: () => new ApiError(401, 'unauthorized', 'Missing API key: send "Authorization: Bearer <key>"', { 'www-authenticate': REALM }),
  invalidKey: () => new ApiError(401, 'unauthorized', 'Invalid API key', { 'www-authenticate': `${REALM}, error="invalid_token"` }),
  disabledKey: () => new ApiError(401, 'unauthorized', 'API key is disabled', { 'www-authenticate': `${REALM}, error="invalid_token"` }),
  keyExpired: (expiredAt: number) => new ApiError(401, 'key_expired', `API key expired at ${new Date(expiredAt).toISOString()}`,
    { 'www-authenticate': `${REALM}, error="invalid_token", error_description="The API key expired"` }),
  insufficientScope: (method: string, scope: string) => new ApiError(403, 'insufficient_scope', `This API key may not ${method}: it lacks the "${scope}" scope`,
    { 'www-authenticate': `${REALM}, error="insufficient_scope"` }),
  rateLimited: (retryAfterSeconds: number, window: string) =>
    new ApiError(429, 'rate_limited', `Rate limit exceeded for the ${window} window; retry after ${retryAfterSeconds} s`, { 'retry-after': String(retryAfterSeconds) }),
  keyBanned: (retryAfterSeconds: number) =>
    new ApiError(429, 'key_banned', `API key is temporarily banned for continuing after 429s; retry after ${retryAfterSeconds} s`, { 'retry-after': String(retryAfterSeconds) }),
  endpointRemoved: (method: string, path: string, successor: string | undefined) =>
    new ApiError(410, 'endpoint_removed', `${method} ${path} was removed at its sunset date${successor === undefined ? '' : `; use ${successor}`}`),
  upstreamUnavailable: () => new ApiError(502, 'upstream_unavailable', 'The pet store service is unavailable'),
  upstreamTimeout: () => new ApiError(504, 'upstream_timeout', 'The pet store service did not answer in time'),
  unavailable: (reason: string) => new ApiError(503, 'unavailable', reason),
  /** The backend's connections are taken and the request could not get one within its upstream budget. */
  upstreamBusy: (retryAfterSeconds: number) =>
    new ApiError(503, 'unavailable', `The pet store service cannot take this request in time; retry after ${retryAfterSeconds} s`, { 'retry-after': String(retryAfterSeconds) }),
  /** Load shed at the edge: the gateway is over capacity; `headers` state the consumer's policy with nothing left until then. */
  overloaded: (retryAfterSeconds: number, headers: Record<string, string>) =>
    new ApiError(503, 'unavailable', `The gateway is over capacity; retry after ${retryAfterSeconds} s`, { ...headers, 'retry-after': String(retryAfterSeconds) }),
  /** Limiter store failing under STORE_ON_ERROR=closed: no decision, so the headers say "nothing left, retry shortly". */
  limiterUnavailable: (headers: Record<string, string>) => new ApiError(503, 'unavailable', 'The rate limiter is unavailable', headers),
  // The edge: requests refused as malformed, before or beside the router.
  badUrl: () => requestErrors.invalidParameter('The URL is not valid'),
  paramTooLong: () => requestErrors.invalidParameter('A path parameter is longer than the limit'),
  duplicateAuthorization: () => new ApiError(400, 'invalid_request', 'Send exactly one Authorization header'),
  jsonTooDeep: (maxDepth: number) => requestErrors.notJson(`nested deeper than ${maxDepth} levels`),
  // What Node's HTTP parser refuses, answered on the raw socket.
  headersTooLarge: () => new ApiError(431, 'headers_too_large', 'Request headers are larger than the limit'),
  requestTimeout: () => new ApiError(408, 'request_timeout', 'The request was not received in time'),
  notHttp: () => new ApiError(400, 'invalid_request', 'The request is not valid HTTP'),
  connectNotAllowed: () => new ApiError(405, 'method_not_allowed', 'Method CONNECT is not allowed')
} as const

/** The admin app's errors (loopback port). */
export const adminErrors = {
  tokenRequired: () => new ApiError(401, 'unauthorized', 'Admin token required', { 'www-authenticate': 'Bearer realm="petstore-admin"' }),
  consumerNotFound: (id: string) => new ApiError(404, 'not_found', `No consumer or key with id ${id}`),
  keyNotFound: (keyId: string) => new ApiError(404, 'not_found', `No key with id ${keyId}`),
  keyNotBanned: (keyId: string) => new ApiError(404, 'not_found', `Key ${keyId} is not banned`),
  storeNoAnswer: () => gatewayErrors.unavailable('The limiter store did not answer; try again'),
  reloadUnavailable: () => new ApiError(409, 'reload_unavailable', 'This gateway runs on a fixed config, not a config directory')
} as const

/** Maps anything thrown inside a request to an ApiError; unknown errors become a bare 500. */
export function toApiError (err: unknown): ApiError {
  if (err instanceof ApiError) return err
  const e = err as Partial<FastifyError> & { validationContext?: string }
  if (Array.isArray(e.validation)) {
    const where = e.validationContext === 'body' ? 'invalid_body' : 'invalid_parameter'
    return requestErrors.invalid(where, e.message ?? 'Invalid request')
  }
  const status = typeof e.statusCode === 'number' ? e.statusCode : 500
  if (typeof e.code === 'string' && e.code.startsWith('FST_ERR_CTP_')) {
    if (status === 413) return requestErrors.payloadTooLarge()
    if (status === 415) return requestErrors.unsupportedMediaType()
    return requestErrors.notJson(e.message ?? 'parse error')
  }
  if (e instanceof SyntaxError && status === 400) {
    return requestErrors.notJson(e.message)
  }
  if (status >= 400 && status < 500) {
    return requestErrors.invalidParameter(e.message ?? 'Bad request')
  }
  return requestErrors.internal()
}

export function sendApiError (reply: FastifyReply, error: ApiError): FastifyReply {
  if (error.headers !== undefined) reply.headers(error.headers)
  return reply.code(error.status).type('application/json; charset=utf-8').send(error.body)
}

/**
 * The Error shape as a whole HTTP/1.1 response that closes the connection, for a socket Fastify has no
 * request on (what Node's parser refused, CONNECT).
 */
export function rawErrorResponse (error: ApiError, requestId: string): string {
  const json = JSON.stringify(error.body)
  return `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status] ?? 'Error'}\r\n` +
    'content-type: application/json; charset=utf-8\r\n' +
    `content-length: ${Buffer.byteLength(json)}\r\n` +
    `x-request-id: ${requestId}\r\n` +
    'connection: close\r\n\r\n' + json
}

/** Installs the error handler and the not-found handler that answer every failure with the Error shape. */
export function installErrorHandling (app: FastifyInstance): void {
  app.setErrorHandler(function handleError (err: unknown, request: FastifyRequest, reply: FastifyReply) {
    const apiError = toApiError(err)
    if (apiError.status >= 500 && !(err instanceof ApiError)) {
      request.log.error({ err }, 'request failed')
    }
    return sendApiError(reply, apiError)
  })
  app.setNotFoundHandler(function routeNotFound (request: FastifyRequest, reply: FastifyReply) {
    return sendApiError(reply, requestErrors.routeNotFound(request.method, request.url.split('?', 1)[0] ?? ''))
  })
}

const ALL_METHODS: HTTPMethods[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']

/**
 * Answers 405 + Allow on `url` for every method that is not in `allowed`, so a known path with the wrong
 * method is told apart from an unknown path (404). HEAD is implied by GET.
 */
export function registerMethodNotAllowed (app: FastifyInstance, url: string, allowed: readonly HTTPMethods[]): void {
  const allowedSet = new Set<HTTPMethods>(allowed)
  if (allowedSet.has('GET')) allowedSet.add('HEAD')
  const allow = ALL_METHODS.filter((m) => allowedSet.has(m)).join(', ')
  const others = ALL_METHODS.filter((m) => !allowedSet.has(m))
  app.route({
    method: others,
    url,
    // Answered in onRequest, before any body is parsed: a wrong method is 405 whatever it carries.
    onRequest: function methodNotAllowed (request, _reply, done) {
      done(requestErrors.methodNotAllowed(request.method, url, allow))
    },
    handler: /* c8 ignore next */ async () => undefined
  })
}
