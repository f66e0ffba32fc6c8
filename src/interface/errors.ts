// The error catalogue of the interface: every error either service answers (the gateway, its admin
// app, the Pet Store backend), defined once with its status, code and message, and the one place that
// renders the Error shape ({code, message, status}) and turns any thrown error (ours, Fastify's
// validation or body-parsing errors, anything unexpected) into it. Both services install
// `installErrorHandling`; hooks and routes throw entries of the catalogue.
import { STATUS_CODES } from 'node:http'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify'
import { ErrorLogThrottle } from '../shared/error-log-throttle.js'
import type { ErrorBody } from './schemas.js'

/** One code of the catalogue: the HTTP status it is always answered with, and what it tells a client. */
export interface ErrorCodeEntry {
  readonly status: number
  /** One sentence for clients; the OpenAPI document lists it under the status of each operation that can answer it. */
  readonly description: string
  /** False for a code only the admin app answers (it is then not part of the public document). */
  readonly publicPort?: false
}

/**
 * Every code either service answers, once: its status and its meaning. The factories below build
 * each error from this table, and the OpenAPI document takes its statuses, codes and descriptions
 * from it, so neither can drift from what is answered.
 */
export const ERROR_CODES = {
  invalid_body: { status: 400, description: 'The body is not valid JSON, or a field is missing, unknown or invalid' },
  invalid_parameter: { status: 400, description: 'A query or path parameter is invalid, or the URL is malformed' },
  invalid_request: { status: 400, description: 'The request itself is malformed, e.g. more than one `Authorization` header' },
  unauthorized: { status: 401, description: 'The API key is missing, invalid or disabled' },
  key_expired: { status: 401, description: 'The API key is past its expiry date; the message says when it expired' },
  forbidden: { status: 403, description: 'The admin port refuses a request from a foreign Host or Origin, or a state-changing one that is not JSON', publicPort: false },
  insufficient_scope: { status: 403, description: 'The API key lacks the scope this method needs: `read` for GET and HEAD, `write` for every other method' },
  not_found: { status: 404, description: 'No animal with this id (on the admin port: no such consumer, key, plan or ban)' },
  route_not_found: { status: 404, description: 'No operation at this path' },
  method_not_allowed: { status: 405, description: 'The path exists but not with this method; `Allow` lists the methods it takes' },
  request_timeout: { status: 408, description: 'The request was not received in time' },
  reload_unavailable: { status: 409, description: 'The gateway runs on a fixed config, not a config directory', publicPort: false },
  endpoint_removed: { status: 410, description: 'The operation is past its sunset date and has been removed' },
  payload_too_large: { status: 413, description: 'The request body is over the size limit' },
  unsupported_media_type: { status: 415, description: 'The request body is not `application/json`' },
  rate_limited: { status: 429, description: 'Over the rate limit: wait `Retry-After` seconds before retrying, and back off exponentially' },
  key_banned: { status: 429, description: 'The API key is temporarily banned for continuing after 429s: wait `Retry-After` seconds' },
  quota_exceeded: { status: 429, description: 'The monthly quota is used up until it renews at 00:00 UTC on the 1st: wait `Retry-After` seconds (then, or later when a shorter window is full too); retrying sooner never helps' },
  headers_too_large: { status: 431, description: 'The request headers are over the size limit' },
  internal_error: { status: 500, description: 'Unexpected error' },
  upstream_unavailable: { status: 502, description: 'The pet store service is unavailable' },
  unavailable: { status: 503, description: 'The gateway is shutting down, or its rate limiter is unavailable' },
  upstream_timeout: { status: 504, description: 'The pet store service did not answer in time' }
} as const satisfies Readonly<Record<string, ErrorCodeEntry>>

export type ErrorCode = keyof typeof ERROR_CODES

/**
 * An error answered to the client, in the Error shape. It carries no stack trace: none is ever sent
 * or logged (the error handler logs only unexpected errors), and capturing one cost more than the
 * rest of a 429's work — a flood of rejected requests is exactly when that matters. So it never
 * calls Error's constructor (which is what captures the frames) yet is an Error by its prototype:
 * `instanceof Error` holds for Fastify and every other handler, `stack` is the message line alone,
 * and nothing global changes while it is built.
 */
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging -- the interface below only tells the type checker the prototype chain set after the class
export class ApiError {
  readonly status: number
  readonly code: ErrorCode
  readonly message: string
  readonly headers: Readonly<Record<string, string>> | undefined

  constructor (code: ErrorCode, message: string, headers?: Record<string, string>) {
    this.status = ERROR_CODES[code].status
    this.code = code
    this.message = message
    this.headers = headers
  }

  get stack (): string {
    return `ApiError: ${this.message}`
  }

  get body (): ErrorBody {
    return { code: this.code, message: this.message, status: this.status }
  }
}
Object.setPrototypeOf(ApiError.prototype, Error.prototype)
Object.defineProperty(ApiError.prototype, 'name', { value: 'ApiError', writable: true, configurable: true })
// The class sets what Error's constructor would have; this tells the type checker it is an Error.
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export interface ApiError extends Error {
  readonly message: string
}

const REALM = 'Bearer realm="petstore"'
/**
 * Where a client without a key learns the API: the docs page and the OpenAPI description, both
 * public. Sent on every keyless 401, whatever the path, so it tells nobody which paths exist.
 */
export const DOCS_LINK = '</docs>; rel="help", </v1/openapi.json>; rel="service-desc"'

/** The most of a request path a 404's message repeats: a path of thousands of characters is not echoed back whole. */
export const ECHOED_PATH_MAX = 120

function echoedPath (path: string): string {
  return path.length <= ECHOED_PATH_MAX ? path : `${path.slice(0, ECHOED_PATH_MAX)}… (${path.length} characters)`
}

/** Errors of the request itself, which both services answer the same way. */
export const requestErrors = {
  routeNotFound: (method: string, path: string) => new ApiError('route_not_found', `No route ${method} ${echoedPath(path)}`),
  methodNotAllowed: (method: string, url: string, allow: string) =>
    new ApiError('method_not_allowed', `Method ${method} is not allowed on ${url}`, { allow }),
  /** Fastify's schema validation of a body, or of the params / querystring / headers. */
  invalid: (where: 'invalid_body' | 'invalid_parameter', message: string) => new ApiError(where, message),
  invalidParameter: (message: string) => new ApiError('invalid_parameter', message),
  invalidBody: (message: string) => new ApiError('invalid_body', message),
  notJson: () => new ApiError('invalid_body', 'Request body is not valid JSON'),
  emptyJson: () => new ApiError('invalid_body', 'Request body is empty but content-type is application/json'),
  /** `limitBytes`: the route's body limit, said in the message so a client knows what fits. */
  payloadTooLarge: (limitBytes?: number) => new ApiError('payload_too_large',
    limitBytes === undefined ? 'Request body is larger than the limit' : `Request body is over the limit of ${limitBytes} bytes`),
  unsupportedMediaType: () => new ApiError('unsupported_media_type', 'Request body must be application/json'),
  internal: () => new ApiError('internal_error', 'The server could not complete the request')
} as const

/** The Pet Store backend's own errors. */
export const backendErrors = {
  petNotFound: (petId: number) => new ApiError('not_found', `Pet ${petId} not found`),
  invalidCursor: () => requestErrors.invalidParameter('querystring/cursor is not a valid cursor'),
  notFinite: (part: string, name: string) => requestErrors.invalidParameter(`${part}/${name} must be a finite integer`),
  mistypedField: (field: string, type: string) => requestErrors.invalidBody(`body/${field} must be ${type}`)
} as const

/** Every error the gateway itself answers on its public port. */
export const gatewayErrors = {
  missingKey: () => new ApiError('unauthorized', 'Missing API key: send "Authorization: Bearer <key>"; the API is documented at /docs',
    { 'www-authenticate': REALM, link: DOCS_LINK }),
  invalidKey: () => new ApiError('unauthorized', 'Invalid API key', { 'www-authenticate': `${REALM}, error="invalid_token"` }),
  disabledKey: () => new ApiError('unauthorized', 'API key is disabled', { 'www-authenticate': `${REALM}, error="invalid_token"` }),
  keyExpired: (expiredAt: number) => new ApiError('key_expired', `API key expired at ${new Date(expiredAt).toISOString()}`,
    { 'www-authenticate': `${REALM}, error="invalid_token", error_description="The API key expired"` }),
  insufficientScope: (method: string, scope: string) => new ApiError('insufficient_scope', `This API key may not ${method}: it lacks the "${scope}" scope`,
    { 'www-authenticate': `${REALM}, error="insufficient_scope"` }),
  rateLimited: (retryAfterSeconds: number, window: string) =>
    new ApiError('rate_limited', `Rate limit exceeded for the ${window} window; retry after ${retryAfterSeconds} s`, { 'retry-after': String(retryAfterSeconds) }),
  quotaExceeded: (retryAfterSeconds: number) =>
    new ApiError('quota_exceeded', `Monthly quota used up (it renews at 00:00 UTC on the 1st); retry after ${retryAfterSeconds} s`, { 'retry-after': String(retryAfterSeconds) }),
  keyBanned: (retryAfterSeconds: number) =>
    new ApiError('key_banned', `API key is temporarily banned for continuing after 429s; retry after ${retryAfterSeconds} s`, { 'retry-after': String(retryAfterSeconds) }),
  endpointRemoved: (method: string, path: string, successor: string | undefined) =>
    new ApiError('endpoint_removed', `${method} ${path} was removed at its sunset date${successor === undefined ? '' : `; use ${successor}`}`),
  upstreamUnavailable: () => new ApiError('upstream_unavailable', 'The pet store service is unavailable'),
  upstreamTimeout: () => new ApiError('upstream_timeout', 'The pet store service did not answer in time'),
  unavailable: (reason: string) => new ApiError('unavailable', reason),
  /** The backend's connections are taken and the request could not get one within its upstream budget. */
  upstreamBusy: (retryAfterSeconds: number) =>
    new ApiError('unavailable', `The pet store service cannot take this request in time; retry after ${retryAfterSeconds} s`, { 'retry-after': String(retryAfterSeconds) }),
  /** Load shed at the edge: the gateway is over capacity; `headers` state the consumer's policy with nothing left until then. */
  overloaded: (retryAfterSeconds: number, headers: Record<string, string>) =>
    new ApiError('unavailable', `The gateway is over capacity; retry after ${retryAfterSeconds} s`, { ...headers, 'retry-after': String(retryAfterSeconds) }),
  /** Limiter store failing under STORE_ON_ERROR=closed: no decision, so the headers say "nothing left, retry shortly". */
  limiterUnavailable: (headers: Record<string, string>) => new ApiError('unavailable', 'The rate limiter is unavailable', headers),
  // The edge: requests refused as malformed, before or beside the router.
  badUrl: () => requestErrors.invalidParameter('The URL is not valid'),
  paramTooLong: () => requestErrors.invalidParameter('A path parameter is longer than the limit'),
  duplicateAuthorization: () => new ApiError('invalid_request', 'Send exactly one Authorization header'),
  jsonTooDeep: (maxDepth: number) => requestErrors.invalidBody(`Request body JSON is nested deeper than ${maxDepth} levels`),
  // What Node's HTTP parser refuses, answered on the raw socket.
  headersTooLarge: () => new ApiError('headers_too_large', 'Request headers are larger than the limit'),
  requestTimeout: () => new ApiError('request_timeout', 'The request was not received in time'),
  notHttp: () => new ApiError('invalid_request', 'The request is not valid HTTP'),
  connectNotAllowed: () => new ApiError('method_not_allowed', 'Method CONNECT is not allowed')
} as const

/** The admin app's errors (loopback port). */
export const adminErrors = {
  tokenRequired: () => new ApiError('unauthorized', 'Admin token required', { 'www-authenticate': 'Bearer realm="petstore-admin"' }),
  // Browser defences of the admin port (admin/request-guard.ts).
  foreignHost: () => new ApiError('forbidden', 'The Host header must name this admin port: localhost, a loopback address, or a name in ADMIN_HOSTS'),
  crossOrigin: () => new ApiError('forbidden', 'Cross-origin requests may not change the gateway'),
  jsonRequired: () => new ApiError('forbidden', 'State-changing admin requests must be sent with Content-Type: application/json'),
  consumerNotFound: (id: string) => new ApiError('not_found', `No consumer or key with id ${id}`),
  keyNotFound: (keyId: string) => new ApiError('not_found', `No key with id ${keyId}`),
  keyNotBanned: (keyId: string) => new ApiError('not_found', `Key ${keyId} is not banned`),
  planNotFound: (plan: string, known: readonly string[]) => new ApiError('not_found', `No plan named ${plan} (known: ${known.join(', ')})`),
  storeNoAnswer: () => gatewayErrors.unavailable('The limiter store did not answer; try again'),
  /** The usage history and shadow records (history/) did not answer: its own connection, not the limiter's. */
  historyNoAnswer: () => gatewayErrors.unavailable('The usage history store did not answer; try again'),
  reloadUnavailable: () => new ApiError('reload_unavailable', 'This gateway runs on a fixed config, not a config directory')
} as const

/**
 * Maps anything thrown inside a request to an ApiError; unknown errors become a bare 500.
 * `bodyLimit`: the request's body limit in bytes, named by a 413's message.
 */
export function toApiError (err: unknown, bodyLimit?: number): ApiError {
  if (err instanceof ApiError) return err
  const e = err as Partial<FastifyError> & { validationContext?: string }
  if (Array.isArray(e.validation)) {
    const where = e.validationContext === 'body' ? 'invalid_body' : 'invalid_parameter'
    return requestErrors.invalid(where, e.message ?? 'Invalid request')
  }
  const status = typeof e.statusCode === 'number' ? e.statusCode : 500
  if (typeof e.code === 'string' && e.code.startsWith('FST_ERR_CTP_')) {
    if (status === 413) return requestErrors.payloadTooLarge(bodyLimit)
    if (status === 415) return requestErrors.unsupportedMediaType()
    // Fastify's own messages for these repeat ours ("Body is not valid JSON but content-type is set
    // to 'application/json'"): one sentence is said instead.
    if (e.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') return requestErrors.emptyJson()
    if (e.code === 'FST_ERR_CTP_INVALID_JSON_BODY') return requestErrors.notJson()
    return requestErrors.invalidBody(e.message ?? 'Request body could not be read')
  }
  if (e instanceof SyntaxError && status === 400) {
    return requestErrors.notJson()
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

/**
 * Installs the error handler and the not-found handler that answer every failure with the Error
 * shape. An unexpected error is logged once per kind per interval (shared/error-log-throttle.ts),
 * with the count of those left out since the last line of its kind.
 */
export function installErrorHandling (app: FastifyInstance, throttle = new ErrorLogThrottle()): void {
  app.setErrorHandler(function handleError (err: unknown, request: FastifyRequest, reply: FastifyReply) {
    const apiError = toApiError(err, (err as Partial<FastifyError>).statusCode === 413 ? request.routeOptions.bodyLimit : undefined)
    if (apiError.status >= 500 && !(err instanceof ApiError)) {
      const { log, suppressed } = throttle.admit(err)
      if (log) request.log.error(suppressed > 0 ? { err, suppressed } : { err }, 'request failed')
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
