// Maps what undici / @fastify/reply-from report about the backend to the gateway's 502 and 504,
// so a backend fault is always a clean Error body and never a 500 with upstream internals.
import { gatewayErrors, type ApiError } from '../../interface/errors.js'

const TIMEOUT_CODES = new Set([
  'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT',
  'FST_REPLY_FROM_TIMEOUT', 'FST_REPLY_FROM_GATEWAY_TIMEOUT', 'FST_REPLY_FROM_HTTP_REQUEST_TIMEOUT'
])

function codesOf (error: unknown): string[] {
  const codes: string[] = []
  let e: unknown = error
  for (let depth = 0; depth < 4 && typeof e === 'object' && e !== null; depth++) {
    const code = (e as { code?: unknown }).code
    if (typeof code === 'string') codes.push(code)
    e = (e as { cause?: unknown }).cause
  }
  return codes
}

export function upstreamError (error: unknown): ApiError {
  return codesOf(error).some((c) => TIMEOUT_CODES.has(c)) ? gatewayErrors.upstreamTimeout() : gatewayErrors.upstreamUnavailable()
}
