// The client address of a connection, fixed when the connection is accepted. Node's
// `socket.remoteAddress` asks the kernel every time it is read and is undefined once the socket is
// gone: a request still in the gateway when its client reset the connection (a limiter answer from
// Redis, a wait at the upstream gate) read `undefined` as its client and failed in the middle of
// its way out (issue 39, row 1). So the address is read once, on accept, and kept on the socket:
// every later reader (request.ip, the forwarding headers, the limiter's anonymous id, load
// shedding's fair share) sees the same text for the request's whole life, whatever its socket did.
import type { Server } from 'node:http'
import type { Socket } from 'node:net'

const kPeerAddress = Symbol('gateway.peerAddress')

interface PeerSocket extends Socket {
  [kPeerAddress]?: string
}

/** Keeps `socket`'s peer address on it: called on accept (the server's 'connection' event). */
export function rememberPeerAddress (socket: Socket): void {
  const peer = socket as PeerSocket
  if (peer[kPeerAddress] === undefined) peer[kPeerAddress] = socket.remoteAddress ?? ''
}

/**
 * The address `socket` was accepted from; a socket the listener never saw (Fastify's inject) is
 * read now. Never undefined: '' for a socket that was gone before anyone read it.
 */
export function peerAddress (socket: Socket): string {
  const peer = socket as PeerSocket
  const known = peer[kPeerAddress]
  if (known !== undefined) return known
  rememberPeerAddress(socket)
  return peer[kPeerAddress] ?? ''
}

/** Fixes the peer address of every connection `server` accepts, before any other listener runs. */
export function rememberPeerAddresses (server: Server): void {
  server.prependListener('connection', rememberPeerAddress)
}
