// What the backend is told: the client's request headers minus those the gateway alone decides
// (identity, hop-by-hop, forwarding) and minus those that would change the meaning of the request
// after the gateway authorised it (method overrides), plus the gateway's own identity and forwarding
// headers. Kept apart from the proxy's wiring because it is the security policy of the proxy
// (docs/decisions.md §11).
import type { FastifyRequest } from 'fastify'
import { plainAddress } from '../edge/client-address.js'

/** Headers that only the gateway may set, and that never leave for the backend as the client sent them. */
// `expect`: Node already answered the client's 100-continue; undici refuses to send the header (→ 502).
export const GATEWAY_OWNED = ['authorization', 'x-consumer-id', 'x-consumer-plan', 'x-request-id', 'connection', 'keep-alive', 'proxy-authorization', 'expect'] as const

/**
 * Method overrides: a backend (or a framework in front of it) that honours one would run, say, a
 * DELETE for a GET that a read-only key was allowed to send, since scopes are decided on the real
 * method. The interface has no use for them, so they are dropped rather than refused (400): a
 * client library that adds one to every request keeps working, and the backend sees exactly the
 * method the gateway authorised.
 */
export const METHOD_OVERRIDES = ['x-http-method-override', 'x-http-method', 'x-method-override'] as const

/**
 * Hop-by-hop (RFC 9110 §7.6.1) and framing headers: they describe the client's connection, not the
 * backend's. `host` and `content-length` are the gateway's to set for the request it sends (undici
 * refuses `transfer-encoding`, `keep-alive` and `upgrade` outright).
 */
export const HOP_BY_HOP = ['proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host', 'content-length'] as const

/**
 * Who the client is and how it came, as a client (or a proxy) may claim it: never passed on as
 * sent. The gateway writes `X-Forwarded-For` (the client it decided, and the trusted hops after it),
 * `X-Forwarded-Proto` and `X-Forwarded-Host` itself; every other `X-Forwarded-*` name is dropped by
 * its prefix (isForwarding). `Forwarded` and `X-Real-IP` are not written: the backend reads one
 * family of headers, the gateway's.
 */
export const FORWARDING = ['forwarded', 'x-real-ip'] as const
const FORWARDING_PREFIX = 'x-forwarded-'

type Headers = Record<string, string | string[] | undefined>

const NOT_FORWARDED = new Set<string>([...GATEWAY_OWNED, ...METHOD_OVERRIDES, ...HOP_BY_HOP, ...FORWARDING])
/** With `request.ownsTraceContext` (observability/tracing): the client's trace context stays here too. */
const NOT_FORWARDED_WITH_TRACE = new Set<string>([...NOT_FORWARDED, 'traceparent', 'tracestate'])

/**
 * `X_Consumer_Id`, `X_HTTP_Method_Override` and the like: many servers (CGI, PHP, nginx's
 * underscores_in_headers) read `_` as `-`, so a client's twin of a dropped header could stand in for it.
 */
function isUnderscoreTwin (name: string): boolean {
  if (name.indexOf('_') === -1) return false
  const dashed = name.replaceAll('_', '-')
  return NOT_FORWARDED.has(dashed) || dashed.startsWith(FORWARDING_PREFIX)
}

/** `X-Forwarded-For`, `-Host`, `-Proto`, `-Port`, `-Prefix`…: the gateway's to write (names arrive lower-cased). */
function isForwarding (name: string): boolean {
  return name.charCodeAt(0) === 120 && name.startsWith(FORWARDING_PREFIX)
}

/** The `Connection` values nearly every client sends: they name no header that would be forwarded, so no set is built for them. */
const PLAIN_CONNECTION = new Set(['keep-alive', 'close'])

/** Header names a client's `Connection` header lists (hop-by-hop by declaration, RFC 9110 §7.6.1). */
function connectionOptions (value: string): Set<string> {
  return new Set(value.toLowerCase().split(',').map((token) => token.trim()).filter((token) => token !== ''))
}

/** What the gateway decided about where a request came from (edge/client-ip.ts, Fastify's trusted proxies). */
export type ForwardingFacts = Pick<FastifyRequest, 'ip' | 'forwardedFor' | 'protocol' | 'host'>

/**
 * The backend's request headers: the client's minus the ones above, plus the gateway's, with `host`
 * the backend's. A filtered copy, not a spread and `delete`s: `delete` turns the object into a slow
 * dictionary, and this runs on every request.
 */
export function backendRequestHeaders (request: Pick<FastifyRequest, 'id' | 'consumer' | 'ownsTraceContext'> & ForwardingFacts, headers: Headers, host: string): Headers {
  const out: Headers = {}
  const dropped = request.ownsTraceContext ? NOT_FORWARDED_WITH_TRACE : NOT_FORWARDED
  const connection = headers.connection
  const listed = typeof connection === 'string' && !PLAIN_CONNECTION.has(connection.toLowerCase()) ? connectionOptions(connection) : undefined
  for (const name in headers) {
    if (!dropped.has(name) && !isForwarding(name) && !isUnderscoreTwin(name) && (listed === undefined || !listed.has(name))) out[name] = headers[name]
  }
  out.host = host
  // Without trusted proxies the client is the socket's peer; behind them, the chain the walk trusted.
  out['x-forwarded-for'] = request.forwardedFor ?? plainAddress(request.ip)
  out['x-forwarded-proto'] = request.protocol
  out['x-forwarded-host'] = request.host
  out['x-request-id'] = request.id
  if (request.consumer !== null) {
    out['x-consumer-id'] = request.consumer.consumerId
    out['x-consumer-plan'] = request.consumer.plan
  }
  return out
}

/** Response headers that are the backend connection's, not the client's: Node frames the client's response itself. */
const RESPONSE_HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade'])

export function isResponseHopByHop (name: string): boolean {
  return RESPONSE_HOP_BY_HOP.has(name)
}
