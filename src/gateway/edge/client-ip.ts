// Who the client is behind trusted proxies. Fastify's own reading of `X-Forwarded-For` takes each
// entry as it is written: a load balancer that appends `198.51.100.7:51234` (some cloud ones do)
// makes every client port a client of its own for the anonymous limiter, and a trusted proxy
// written with a port is not recognised as trusted. Here every hop is normalised first
// (client-address.ts: ports, brackets, zone ids, IPv4 spellings), and an entry that is no address
// at all ends the walk at the trusted hop that reported it: that hop decides, rather than the text
// becoming a client. Only `X-Forwarded-For` is read: a `Forwarded` header is ignored, because a
// proxy appends to one of the two and a client could write the other (docs/decisions.md §11). The
// walk's trusted part is also what the backend is sent as `X-Forwarded-For` (proxy/request-headers.ts).
import proxyAddr from '@fastify/proxy-addr'
import fp from 'fastify-plugin'
import { normaliseAddress, plainAddress } from './client-address.js'
import { peerAddress } from './peer-address.js'

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * Behind trusted proxies: the `X-Forwarded-For` the backend is sent — the client the walk decided,
     * the trusted hops after it and the socket's peer, normalised; null without TRUST_PROXY (the
     * client is the peer).
     */
    forwardedFor: string | null
  }
}

/** TRUST_PROXY: false, true (every hop: refused in production), a hop count, or addresses/CIDRs. */
export type TrustProxy = boolean | number | string

/** Whether the peer `hop` steps away from the gateway (0: the socket's peer) is a trusted proxy. */
export type TrustFunction = (address: string, hop: number) => boolean

/** TRUST_PROXY as one function, for Fastify (host, protocol) and for the client address below. */
export function trustFunction (trust: TrustProxy): TrustFunction {
  if (trust === true) return () => true
  if (trust === false) return () => false
  if (typeof trust === 'number') return (_address, hop) => hop < trust
  return proxyAddr.compile(trust.split(',').map((s) => s.trim()).filter((s) => s !== ''))
}

/**
 * The client address of a request from `peer` carrying `forwardedFor`: from the socket's peer
 * outwards, each trusted hop hands over to the entry it appended (the rightmost one left); the
 * first untrusted hop is the client. An entry that is not an address stops the walk at the hop
 * before it.
 */
export function forwardedClientAddress (peer: string, forwardedFor: string | undefined, trusted: TrustFunction): string {
  return forwardedChain(peer, forwardedFor, trusted)[0] ?? peer
}

/**
 * The walk of forwardedClientAddress, kept: from the client it decides (first) through the trusted
 * hops to the socket's peer (last), each entry normalised. What lies left of the client is the
 * client's own word (or an untrusted hop's) and is not kept, so the first entry is always the
 * address the gateway counted. Scans the header from its end without splitting it.
 */
export function forwardedChain (peer: string, forwardedFor: string | undefined, trusted: TrustFunction): string[] {
  const chain = [peer]
  let client = peer
  let end = forwardedFor?.length ?? 0
  for (let hop = 0; forwardedFor !== undefined && trusted(client, hop); hop++) {
    const start = forwardedFor.lastIndexOf(',', end - 1)
    const next = normaliseAddress(forwardedFor.slice(start + 1, end))
    if (next === undefined) break
    client = next
    chain.push(next)
    if (start === -1) break
    end = start
  }
  return chain.reverse()
}

export interface ClientIpOptions {
  trustProxy: TrustProxy
}

/**
 * First in the pipeline: `request.ip` becomes the client address, read once (Fastify's getter would
 * ask the socket again on every read, and a socket that is gone answers undefined). Without
 * TRUST_PROXY it is the peer address fixed when the connection was accepted (peer-address.ts);
 * behind trusted proxies, the normalised client the `X-Forwarded-For` walk decides from that peer.
 */
export const clientIpPlugin = fp<ClientIpOptions>(async function clientIpPlugin (app, { trustProxy }) {
  app.decorateRequest('forwardedFor', null)
  if (trustProxy === false) {
    app.addHook('onRequest', function peerIsClient (request, _reply, done) {
      // Fastify's `ip` is a getter on the request's prototype: an own property shadows it.
      Object.defineProperty(request, 'ip', { value: peerAddress(request.raw.socket), enumerable: true })
      done()
    })
    return
  }
  const trusted = trustFunction(trustProxy)
  app.addHook('onRequest', function clientAddress (request, _reply, done) {
    const header = request.headers['x-forwarded-for']
    // Node joins repeated X-Forwarded-For lines with ", "; the array is only the type's possibility.
    const forwardedFor = Array.isArray(header) ? header.join(', ') : header
    const peer = peerAddress(request.raw.socket)
    const chain = forwardedChain(peer, forwardedFor, trusted)
    Object.defineProperty(request, 'ip', { value: chain[0] ?? peer, enumerable: true })
    request.forwardedFor = chain.map(plainAddress).join(', ')
    done()
  })
}, { name: 'gateway-client-ip' })
