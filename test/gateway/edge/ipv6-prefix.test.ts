// Anonymous IPv6 clients are counted per prefix (anonymous.ipv6Prefix, default /64): addresses of
// one /64 share one window, another /64 gets its own. Real connections from real IPv6 source
// addresses: the setup routes 2001:db8::/48 (documentation prefix) to the loopback interface and
// allows binding to any address in it (as root, idempotently). Where the machine forbids that, the
// same assertions run through app.inject({ remoteAddress }) instead, and the test says so.
import t, { type Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildGateway } from '../../../src/gateway/app.js'
import { startBackend } from '../../helpers/backend.js'
import { requestFromAddress } from '../../helpers/edge-flood.js'
import { startGateway } from '../../helpers/gateway.js'
import { plansYaml, testConfig } from '../../helpers/config-fixture.js'
import { setUpIpv6Loopback } from '../../helpers/ipv6-loopback.js'

const PER_MINUTE = 3
const LISTEN = '2001:db8::1'

function config (ipv6Prefix?: number): ReturnType<typeof testConfig> {
  const plans = plansYaml({ anonymous: { perMinute: PER_MINUTE, perDay: 1000 } })
  return testConfig({
    'plans.yaml': ipv6Prefix === undefined ? plans : plans.replace(/^anonymous: \{ (.*) \}$/m, `anonymous: { $1, ipv6Prefix: ${ipv6Prefix} }`)
  })
}

type Ask = (address: string) => Promise<{ status: number, remaining: string | undefined }>

/** Anonymous GET /v1/pets from `address`, over a real connection bound to it. */
function overSockets (port: number): Ask {
  return async (address) => await requestFromAddress(port, address, LISTEN)
}

/** The fallback: the same request injected with `remoteAddress`. */
function injected (app: FastifyInstance): Ask {
  return async (address) => {
    const res = await app.inject({ method: 'GET', url: '/v1/pets', remoteAddress: address })
    const remaining = res.headers['x-ratelimit-remaining']
    return { status: res.statusCode, remaining: remaining === undefined ? undefined : String(remaining) }
  }
}

async function gatewayAsker (t: Test, ipv6Prefix: number | undefined, real: boolean): Promise<Ask> {
  const backend = await startBackend(t)
  const app = await buildGateway({ config: config(ipv6Prefix), backendUrl: backend.url, logger: false })
  t.teardown(() => app.close())
  if (!real) return injected(app)
  await app.listen({ host: LISTEN, port: 0 })
  return overSockets((app.server.address() as { port: number }).port)
}

t.test('IPv6 clients share one anonymous window per prefix', async (t) => {
  const real = await setUpIpv6Loopback()
  if (!real) t.comment('cannot route 2001:db8::/48 to lo here: falling back to app.inject({ remoteAddress })')

  t.test('default /64', async (t) => {
    const ask = await gatewayAsker(t, undefined, real)
    const oneNet = ['2001:db8:0:1::a', '2001:db8:0:1::b', '2001:db8:0:1:ffff:ffff:ffff:ffff']
    const seen = []
    for (const address of oneNet) seen.push(await ask(address))
    t.strictSame(seen, [{ status: 401, remaining: '2' }, { status: 401, remaining: '1' }, { status: 401, remaining: '0' }],
      'three addresses of one /64 drew from one window')
    t.equal((await ask('2001:db8:0:1::c')).status, 429, 'a fourth address of the /64 is limited')
    t.strictSame(await ask('2001:db8:0:2::a'), { status: 401, remaining: '2' }, 'another /64 has its own window')
  })

  t.test('ipv6Prefix: 48 widens the client to the /48', async (t) => {
    const ask = await gatewayAsker(t, 48, real)
    t.strictSame(await ask('2001:db8:0:1::a'), { status: 401, remaining: '2' })
    t.strictSame(await ask('2001:db8:0:2::a'), { status: 401, remaining: '1' }, 'a different /64 of the same /48 shares the window')
  })

  t.test('ipv6Prefix: 128 counts every address', async (t) => {
    const ask = await gatewayAsker(t, 128, real)
    t.strictSame(await ask('2001:db8:0:1::a'), { status: 401, remaining: '2' })
    t.strictSame(await ask('2001:db8:0:1::b'), { status: 401, remaining: '2' })
  })
})

t.test('an IPv4-mapped IPv6 address counts as the IPv4 address', async (t) => {
  const gw = await startGateway(t, { config: config(), trustProxy: '127.0.0.1' })
  const remaining = async (forwardedFor: string): Promise<string | null> => {
    const res = await fetch(`${gw.url}/v1/pets`, { headers: { 'x-forwarded-for': forwardedFor } })
    await res.arrayBuffer()
    return res.headers.get('x-ratelimit-remaining')
  }
  t.equal(await remaining('192.0.2.7'), '2')
  t.equal(await remaining('::ffff:192.0.2.7'), '1')
  t.equal(await remaining('::FFFF:c000:0207'), '0')
  t.equal(await remaining('192.0.2.8'), '2', 'the next IPv4 address is another client')
})

t.test('ipv6Prefix outside 32–128 is refused by the config schema', async (t) => {
  t.throws(() => config(31), /ipv6Prefix/)
  t.throws(() => config(129), /ipv6Prefix/)
  t.equal(config().anonymous.ipv6Prefix, 64, 'default 64')
})
