// The gateway's error catalogue: every error the gateway itself answers, defined once with its
// status, code and message. Hooks throw these; the shared error handler renders the Error shape.
import { ApiError } from '../interface/errors.js'

export { ApiError }

const REALM = 'Bearer realm="petstore"'

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
  /** Limiter store failing under STORE_ON_ERROR=closed: no decision, so the headers say "nothing left, retry shortly". */
  limiterUnavailable: (headers: Record<string, string>) => new ApiError(503, 'unavailable', 'The rate limiter is unavailable', headers)
} as const
