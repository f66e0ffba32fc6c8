// Requests the gateway refuses as malformed, answered only after the limiter has counted them, so
// that a client sending nothing but malformed requests is limited (and, with a key, banned) like
// any other, and every such 400 carries rate-limit headers, a request-log line and a metric.
//
// - URLs Fastify's router rejects before any hook (bad percent-encoding, a path parameter over
//   maxParamLength): `frameworkErrors` marks the raw request and routes it again under a path that
//   matches no route, so the whole hook pipeline runs (route `unmatched`), and the mark becomes a 400.
// - More than one Authorization header (RFC 6750: one credential per request). Node keeps only the
//   first, so the raw header list is scanned — only when an Authorization header is present at all.
//   Neither credential is trusted: the request is counted against the client address.
import type { IncomingMessage } from 'node:http'
import fp from 'fastify-plugin'
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { gatewayErrors, sendApiError, type ApiError } from '../../interface/errors.js'

/** Where a request with a URL the router rejected is routed again; no route has it, so it is `unmatched`. */
export const MALFORMED_URL_PATH = '/.gateway/malformed-url'

export type Rejection = 'bad_url' | 'param_too_long' | 'duplicate_authorization'

const REJECTIONS: Record<Rejection, () => ApiError> = {
  bad_url: gatewayErrors.badUrl,
  param_too_long: gatewayErrors.paramTooLong,
  duplicate_authorization: gatewayErrors.duplicateAuthorization
}

const kRejection = Symbol('gateway.edgeRejection')
type MarkedRequest = IncomingMessage & { [kRejection]?: Rejection }

declare module 'fastify' {
  interface FastifyRequest {
    /** Why the gateway will answer 400 once the limiter has counted the request; null for most. */
    edgeRejection: Rejection | null
  }
}

/**
 * Fastify's `frameworkErrors`: instead of answering at once (no hooks: no limiter, log or metric),
 * route the request again as an unmatched one carrying its rejection. A request already routed again
 * is answered here directly, so nothing can loop.
 */
export function frameworkErrors (error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const raw = request.raw as MarkedRequest
  const rejection: Rejection = error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'param_too_long' : 'bad_url'
  if (raw[kRejection] !== undefined) {
    reply.header('x-request-id', request.id)
    sendApiError(reply, REJECTIONS[rejection]())
    return
  }
  raw[kRejection] = rejection
  raw.url = MALFORMED_URL_PATH
  request.server.routing(raw, reply.raw)
}

/** More than one `Authorization` in Node's raw header list (names at even indexes, any case). */
export function hasSecondAuthorization (rawHeaders: readonly string[]): boolean {
  let seen = false
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]
    // The usual spellings compare without allocating; any other case is lower-cased.
    if (name !== undefined && name.length === 13 && (name === 'Authorization' || name === 'authorization' || name.toLowerCase() === 'authorization')) {
      if (seen) return true
      seen = true
    }
  }
  return false
}

/** Before authenticate: notes the rejection; a doubled Authorization is dropped so the client address is counted. */
export const screenRequest = fp(async function screenRequest (app) {
  app.decorateRequest('edgeRejection', null)
  app.addHook('onRequest', function screen (request, _reply, done) {
    // A doubled credential first: it must never authenticate, whatever else is wrong with the request.
    if (request.headers.authorization !== undefined && hasSecondAuthorization(request.raw.rawHeaders)) {
      request.edgeRejection = 'duplicate_authorization'
      request.headers.authorization = undefined
    } else {
      const marked = (request.raw as MarkedRequest)[kRejection]
      if (marked !== undefined) request.edgeRejection = marked
    }
    done()
  })
}, { name: 'gateway-screen-request' })

/** After the limiter: the 400 for a screened request (a 429 from the limiter has already answered). */
export const rejectScreened = fp(async function rejectScreened (app) {
  app.addHook('onRequest', function rejectMalformed (request, _reply, done) {
    if (request.edgeRejection === null) done()
    else done(REJECTIONS[request.edgeRejection]())
  })
}, { name: 'gateway-reject-screened', dependencies: ['gateway-screen-request', 'gateway-limiter'] })
