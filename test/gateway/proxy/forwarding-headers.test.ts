// Forwarding headers as a proxy should write them (issue 33, row 7: `X-Forwarded-For`,
// `X-Forwarded-Host`, `Forwarded` and `X-Real-IP` from an untrusted client reached the backend
// unchanged, and the gateway added none of its own). Seen by a real HTTP server standing in for the
// backend, then by the real backend's request log.
import t from 'tap'
import { startBackend } from '../../helpers/backend.js'
import { startEchoUpstream } from '../../helpers/echo-upstream.js'
import { startGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS } from '../../helpers/config-fixture.js'

/** Everything a client could claim about where it is and how it came. */
const CLAIMS = {
  'x-forwarded-for': '6.6.6.6',
  'x-forwarded-host': 'evil.example',
  'x-forwarded-proto': 'https',
  'x-forwarded-port': '443',
  'x-forwarded-prefix': '/admin',
  forwarded: 'for=6.6.6.6;proto=https;host=evil.example',
  'x-real-ip': '6.6.6.6',
  x_forwarded_for: '7.7.7.7',
  X_Real_IP: '7.7.7.7'
}

const FORWARDING = /^(x[-_]forwarded[-_].*|forwarded|x[-_]real[-_]ip)$/i

function forwardingOf (headers: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => FORWARDING.test(name)))
}

t.test('from an untrusted client every forwarding header is dropped; the gateway writes For, Proto and Host itself', async (t) => {
  const upstream = await startEchoUpstream(t)
  const gw = await startGateway(t, { backendUrl: upstream.url })
  const res = await fetch(`${gw.url}/v1/pets`, { headers: { ...bearer(DEMO_KEYS.pro), ...CLAIMS } })
  t.equal(res.status, 200)
  await res.arrayBuffer()
  t.same(forwardingOf(upstream.received[0]?.headers ?? {}), {
    'x-forwarded-for': '127.0.0.1',
    'x-forwarded-proto': 'http',
    'x-forwarded-host': new URL(gw.url).host
  }, 'the socket\'s peer, the scheme it came by and the Host it asked for: nothing of what the client claimed')
})

t.test('behind trusted proxies the chain from the decided client is passed on with the peer appended; Proto and Host are the proxy\'s', async (t) => {
  const upstream = await startEchoUpstream(t)
  const byAddress = await startGateway(t, { backendUrl: upstream.url, trustProxy: '127.0.0.1' })
  const send = async (url: string, headers: Record<string, string>): Promise<Record<string, unknown>> => {
    const res = await fetch(`${url}/v1/pets`, { headers: { ...bearer(DEMO_KEYS.pro), ...headers } })
    t.equal(res.status, 200)
    await res.arrayBuffer()
    return forwardingOf(upstream.received.at(-1)?.headers ?? {})
  }
  t.same(await send(byAddress.url, { 'x-forwarded-for': '6.6.6.6, 203.0.113.7:51234', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'api.example.com', forwarded: 'for=6.6.6.6', 'x-real-ip': '6.6.6.6' }), {
    'x-forwarded-for': '203.0.113.7, 127.0.0.1',
    'x-forwarded-proto': 'https',
    'x-forwarded-host': 'api.example.com'
  }, 'the client the proxy appended (port dropped), then the proxy; the entry the client wrote itself is not passed on')

  const byHops = await startGateway(t, { backendUrl: upstream.url, trustProxy: 2 })
  t.same((await send(byHops.url, { 'x-forwarded-for': '6.6.6.6, 198.51.100.1, [2001:db8::5]:443' }))['x-forwarded-for'], '198.51.100.1, 2001:db8::5, 127.0.0.1',
    'two trusted hops: the client the second one saw, the first hop, the peer')
  t.same((await send(byHops.url, {}))['x-forwarded-for'], '127.0.0.1', 'no chain: the peer is the client')
  t.same((await send(byHops.url, { 'x-forwarded-for': 'unknown, 198.51.100.9' }))['x-forwarded-for'], '198.51.100.9, 127.0.0.1',
    'an entry that is no address ends the walk at the hop that wrote it')
})

t.test('the backend logs the client the gateway decided, not its own peer (the gateway) and not what the client claimed', async (t) => {
  const backend = await startBackend(t, { logs: true })
  const direct = await startGateway(t, { backendUrl: backend.url })
  const proxied = await startGateway(t, { backendUrl: backend.url, trustProxy: 1 })
  for (const [gw, xff] of [[direct, '6.6.6.6'], [proxied, '6.6.6.6, 203.0.113.7']] as const) {
    const res = await fetch(`${gw.url}/v1/pets`, { headers: { ...bearer(DEMO_KEYS.pro), 'x-forwarded-for': xff } })
    t.equal(res.status, 200)
    await res.arrayBuffer()
  }
  const clients = backend.logs.filter((line) => line.msg === 'request').map((line) => line.client)
  t.same(clients, ['127.0.0.1', '203.0.113.7'], 'untrusted: the socket\'s peer; behind one trusted proxy: the address it appended')
})
