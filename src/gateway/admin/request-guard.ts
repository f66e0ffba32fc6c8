// What keeps a browser out of the admin port. Binding it to loopback stops other machines, not a
// web page open on this one: without ADMIN_TOKEN (the default), a page could POST a reset or a
// reload to 127.0.0.1 (a "simple" cross-origin request needs no preflight), or, by DNS rebinding
// its own name to 127.0.0.1, read the admin API as if it were same-origin. So:
// - every request but the probes names a loopback host (`localhost`, 127.0.0.0/8, ::1) or one of
//   ADMIN_HOSTS in `Host`: a rebound name is none of these;
// - a state-changing request (POST, PUT, PATCH, DELETE) carries no Origin but its own and is
//   `application/json`: a cross-origin page can send JSON only after a CORS preflight, which this
//   app never grants.
// Both answer 403 `forbidden` (docs/decisions.md §14). The probes stay open whatever the Host, as
// they are for ADMIN_TOKEN: kubelets and load balancers address them by the pod's IP, and they
// reveal and change nothing.
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { adminErrors } from '../../interface/errors.js'
import { isLoopbackAddress, parseIpv6 } from '../edge/client-address.js'

/** Host names (or addresses) the admin app answers besides the loopback ones (ADMIN_HOSTS). */
export const DEFAULT_ADMIN_HOSTS: readonly string[] = []

/** Paths open to any Host (and without ADMIN_TOKEN): the probes. */
export const PROBE_PATHS: ReadonlySet<string> = new Set(['/healthz', '/readyz'])

const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])
const HOST_NAME = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/

/** The host of a `Host` header value, lower-cased, without port or IPv6 brackets; undefined if malformed. */
export function hostOf (header: string | undefined): string | undefined {
  if (header === undefined) return undefined
  const value = header.trim().toLowerCase()
  if (value.startsWith('[')) {
    const close = value.indexOf(']')
    const rest = value.slice(close + 1)
    return close === -1 || !(rest === '' || /^:\d{1,5}$/.test(rest)) ? undefined : value.slice(1, close)
  }
  const colon = value.indexOf(':')
  if (colon === -1) return value === '' ? undefined : value
  return colon > 0 && /^:\d{1,5}$/.test(value.slice(colon)) ? value.slice(0, colon) : undefined
}

/** IPv6 hosts in one spelling (eight groups), so `::1` and `0:0::1` match; other hosts as they are. */
function canonicalHost (host: string): string {
  const groups = host.includes(':') ? parseIpv6(host) : undefined
  return groups === undefined ? host : groups.map((g) => g.toString(16)).join(':')
}

/**
 * ADMIN_HOSTS: comma-separated host names or addresses (IPv6 with or without brackets), without
 * scheme or port. Throws on an entry that is neither, naming it.
 */
export function parseAdminHosts (raw: string | undefined): readonly string[] {
  if (raw === undefined || raw.trim() === '') return DEFAULT_ADMIN_HOSTS
  return raw.split(',').map((s) => s.trim()).filter((s) => s !== '').map((entry) => {
    const lower = entry.toLowerCase()
    const host = lower.startsWith('[') && lower.endsWith(']') ? lower.slice(1, -1) : lower
    if (HOST_NAME.test(host)) return host
    if (!host.includes('%') && parseIpv6(host) !== undefined) return canonicalHost(host)
    throw new Error(`ADMIN_HOSTS: "${entry}" is not a host name or address (no scheme, no port)`)
  })
}

/** Whether `host` (from hostOf) is one the admin app answers. */
export function isAdminHost (host: string, allowed: ReadonlySet<string>): boolean {
  return host === 'localhost' || isLoopbackAddress(host) || allowed.has(canonicalHost(host))
}

/** Same origin: the Origin header's host and port are the request's Host (the admin port is plain HTTP). */
function sameOrigin (origin: string, host: string): boolean {
  try {
    const from = new URL(origin)
    return from.host === new URL(`http://${host}`).host
  } catch {
    return false
  }
}

function mediaType (contentType: string | undefined): string {
  if (contentType === undefined) return ''
  const semicolon = contentType.indexOf(';')
  return (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase()
}

type Hook = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void

/** onRequest, first: a request that names a host other than the admin app's is 403. */
export function requireAdminHost (hosts: readonly string[]): Hook {
  const allowed = new Set(hosts.map((host) => canonicalHost(host.toLowerCase())))
  return function requireAdminHost (request, _reply, done) {
    if (PROBE_PATHS.has(request.url)) { done(); return }
    const host = hostOf(request.headers.host)
    if (host === undefined || !isAdminHost(host, allowed)) { done(adminErrors.foreignHost()); return }
    done()
  }
}

/** onRequest, after the token check: a state-changing request from another origin, or not JSON, is 403. */
export function refuseCrossOriginWrites (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
  if (!STATE_CHANGING.has(request.method)) { done(); return }
  const origin = request.headers.origin
  if (origin !== undefined && !sameOrigin(origin, request.headers.host ?? '')) { done(adminErrors.crossOrigin()); return }
  if (mediaType(request.headers['content-type']) !== 'application/json') { done(adminErrors.jsonRequired()); return }
  done()
}
