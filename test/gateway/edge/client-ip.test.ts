// The client address behind trusted proxies: X-Forwarded-For entries written with a port, in
// brackets, with a zone id or in another IPv4 spelling are one client; an entry that is no address
// leaves the decision to the trusted hop that wrote it; a `Forwarded` header is not read. The attack
// it guards against: a load balancer appending `IP:port` made every client port a fresh anonymous
// client (40 of 40 requests admitted where the limit is 30).
import { IncomingMessage } from 'node:http'
import { Socket } from 'node:net'
import proxyAddr from '@fastify/proxy-addr'
import fc from 'fast-check'
import t from 'tap'
import { forwardedClientAddress, trustFunction } from '../../../src/gateway/edge/client-ip.js'
import { startGateway } from '../../helpers/gateway.js'

const ANONYMOUS_PER_MINUTE = 30
const TRIES = 40

t.test('forwardedClientAddress walks from the peer to the first untrusted hop, normalising each', async (t) => {
  const oneHop = trustFunction(1)
  t.equal(forwardedClientAddress('10.0.0.1', '198.51.100.1, 203.0.113.9:4444', oneHop), '203.0.113.9', 'the port is dropped')
  t.equal(forwardedClientAddress('10.0.0.1', '[2001:db8::9]:4444', oneHop), '2001:db8::9')
  t.equal(forwardedClientAddress('10.0.0.1', 'unknown', oneHop), '10.0.0.1', 'no address: the trusted hop decides')
  t.equal(forwardedClientAddress('10.0.0.1', '', oneHop), '10.0.0.1', 'an empty header is no address either')
  t.equal(forwardedClientAddress('10.0.0.1', undefined, oneHop), '10.0.0.1')
  t.equal(forwardedClientAddress('10.0.0.1', '203.0.113.9', trustFunction(false)), '10.0.0.1', 'nothing trusted: the peer')
  t.equal(forwardedClientAddress('10.0.0.1', '198.51.100.1, 203.0.113.9', trustFunction(true)), '198.51.100.1', 'everything trusted: the leftmost')

  const cidr = trustFunction('127.0.0.1, 10.0.0.0/8')
  t.equal(forwardedClientAddress('127.0.0.1', '198.51.100.7, 10.0.0.5:999', cidr), '198.51.100.7', 'a trusted proxy written with a port is still trusted')
  t.equal(forwardedClientAddress('127.0.0.1', '198.51.100.7, garbage, 10.0.0.5', cidr), '10.0.0.5', 'text beyond a trusted proxy: that proxy decides')
  t.equal(forwardedClientAddress('::ffff:127.0.0.1', '198.51.100.7', cidr), '198.51.100.7', 'a mapped peer is its IPv4 address')
  t.equal(forwardedClientAddress('192.0.2.1', '198.51.100.7', cidr), '192.0.2.1', 'an untrusted peer is the client whatever it sends')
  t.throws(() => trustFunction('10.0.0.0/99'), /invalid range/, 'a bad TRUST_PROXY fails at start, as Fastify would')
})

t.test('on plain addresses it agrees with Fastify\'s own walk (proxy-addr)', async (t) => {
  const ipv4 = fc.tuple(fc.constantFrom(10, 127, 198, 203), fc.nat(255), fc.nat(255), fc.nat(255)).map((o) => o.join('.'))
  const trust = fc.oneof(fc.nat(4), fc.constantFrom('10.0.0.0/8', '127.0.0.1,198.0.0.0/8', 'loopback', '203.0.0.0/8,10.0.0.0/8'))
  fc.assert(fc.property(ipv4, fc.array(ipv4, { maxLength: 5 }), trust, (peer, hops, trusted) => {
    const header = hops.length === 0 ? undefined : hops.join(', ')
    const req = new IncomingMessage(new Socket())
    Object.defineProperty(req.socket, 'remoteAddress', { value: peer })
    if (header !== undefined) req.headers['x-forwarded-for'] = header
    return forwardedClientAddress(peer, header, trustFunction(trusted)) === proxyAddr(req, trustFunction(trusted))
  }), { numRuns: 500 })
  t.pass('500 random chains')
})

/** Statuses of TRIES anonymous requests, the n-th sending `headers(n)`. */
async function tally (url: string, headers: (n: number) => Record<string, string>): Promise<Record<number, number>> {
  const seen: Record<number, number> = {}
  for (let n = 0; n < TRIES; n++) {
    const res = await fetch(`${url}/v1/pets`, { headers: headers(n) })
    await res.arrayBuffer()
    seen[res.status] = (seen[res.status] ?? 0) + 1
  }
  return seen
}

const LIMITED = { 401: ANONYMOUS_PER_MINUTE, 429: TRIES - ANONYMOUS_PER_MINUTE }

t.test('X-Forwarded-For with a port appended cannot escape the anonymous limit', async (t) => {
  const gw = await startGateway(t, { trustProxy: 1 })
  t.same(await tally(gw.url, (n) => ({ 'x-forwarded-for': `198.51.100.77:${40_000 + n}` })), LIMITED, 'IPv4:port: one client')
  t.same(await tally(gw.url, (n) => ({ 'x-forwarded-for': `[2001:db8::77]:${40_000 + n}` })), LIMITED, '[IPv6]:port: one client')
  const spellings = ['203.0.113.5', '203.0.113.005', '203.0.113.5:8080', '203.000.113.5:65535']
  t.same(await tally(gw.url, (n) => ({ 'x-forwarded-for': spellings[n % spellings.length] as string })), LIMITED, 'spellings of one IPv4 address: one client')
})

t.test('text that is no address does not become a client: the trusted hop that wrote it decides', async (t) => {
  const gw = await startGateway(t, { trustProxy: 1 })
  t.same(await tally(gw.url, (n) => ({ 'x-forwarded-for': `client-${n}.example` })), LIMITED, 'forty names count as the proxy, one client')
})

t.test('a trusted proxy listed by CIDR is recognised with a port, and Forwarded is not read', async (t) => {
  const gw = await startGateway(t, { trustProxy: '127.0.0.1,10.0.0.0/8' })
  t.same(await tally(gw.url, (n) => ({ 'x-forwarded-for': `198.51.100.9, 10.0.0.5:${30_000 + n}` })), LIMITED,
    'the proxy 10.0.0.5:<port> is trusted, the client behind it counted once')
  t.same(await tally(gw.url, (n) => ({ 'x-forwarded-for': '198.51.100.10', forwarded: `for="[2001:db8::${n}]:80"` })), LIMITED,
    'a Forwarded header changes nothing')
})
