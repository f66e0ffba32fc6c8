// The Error shape ({code, message, status}) that every error response of both services uses, and the
// one place that turns any thrown error (ours, Fastify's validation or body-parsing errors, anything
// unexpected) into it. Both the gateway and the backend install `installErrorHandling`.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify'

export interface ErrorBody {
  code: string
  message: string
  status: number
}

export const errorBodySchema = {
  $id: 'Error',
  type: 'object',
  required: ['code', 'message', 'status'],
  additionalProperties: false,
  properties: {
    code: { type: 'string', description: 'Machine-readable error code' },
    message: { type: 'string', description: 'Human-readable description' },
    status: { type: 'integer', description: 'The HTTP status code' }
  }
} as const

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

/** Maps anything thrown inside a request to an ApiError; unknown errors become a bare 500. */
export function toApiError (err: unknown): ApiError {
  if (err instanceof ApiError) return err
  const e = err as Partial<FastifyError> & { validationContext?: string }
  if (Array.isArray(e.validation)) {
    const where = e.validationContext === 'body' ? 'invalid_body' : 'invalid_parameter'
    return new ApiError(400, where, e.message ?? 'Invalid request')
  }
  const status = typeof e.statusCode === 'number' ? e.statusCode : 500
  if (typeof e.code === 'string' && e.code.startsWith('FST_ERR_CTP_')) {
    if (status === 413) return new ApiError(413, 'payload_too_large', 'Request body is larger than the limit')
    if (status === 415) return new ApiError(415, 'unsupported_media_type', 'Request body must be application/json')
    return new ApiError(400, 'invalid_body', `Request body is not valid JSON: ${e.message ?? 'parse error'}`)
  }
  if (e instanceof SyntaxError && status === 400) {
    return new ApiError(400, 'invalid_body', `Request body is not valid JSON: ${e.message}`)
  }
  if (status >= 400 && status < 500) {
    return new ApiError(400, 'invalid_parameter', e.message ?? 'Bad request')
  }
  return new ApiError(500, 'internal_error', 'The server could not complete the request')
}

export function sendApiError (reply: FastifyReply, error: ApiError): FastifyReply {
  if (error.headers !== undefined) reply.headers(error.headers)
  return reply.code(error.status).type('application/json; charset=utf-8').send(error.body)
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
    return sendApiError(reply, new ApiError(404, 'route_not_found', `No route ${request.method} ${request.url.split('?', 1)[0] ?? ''}`))
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
      done(new ApiError(405, 'method_not_allowed', `Method ${request.method} is not allowed on ${url}`, { allow }))
    },
    handler: /* c8 ignore next */ async () => undefined
  })
}
