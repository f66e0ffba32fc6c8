// TRUST_PROXY=true trusts every X-Forwarded-For hop, so a client picks its own address (its
// leftmost entry) and with it its anonymous rate-limit window. Refused at start in production,
// warned about elsewhere; a hop count or the proxies' addresses trust only what they should.
import t from 'tap'
import { settingsFromEnv } from '../../../src/gateway/runtime/settings.js'
import { startBackend } from '../../helpers/backend.js'
import { startGateway } from '../../helpers/gateway.js'
import { plansYaml, FIXTURE_CONFIG_DIR, testConfig } from '../../helpers/config-fixture.js'
import { freePort } from '../../helpers/ports.js'
import { runEntry, waitForProcessHttp } from '../../helpers/processes.js'
import { poll } from '../../helpers/poll.js'

async function gatewayEnv (): Promise<Record<string, string>> {
  return {
    GATEWAY_HOST: '127.0.0.1',
    GATEWAY_PORT: String(await freePort()),
    ADMIN_PORT: String(await freePort()),
    BACKEND_URL: 'http://127.0.0.1:9',
    CONFIG_DIR: FIXTURE_CONFIG_DIR,
    CONFIG_WATCH: 'false',
    TRUST_PROXY: 'true'
  }
}

t.test('TRUST_PROXY=true with NODE_ENV=production: the process exits non-zero and says what to set', async (t) => {
  const gateway = runEntry(t, 'src/gateway/server.ts', { ...await gatewayEnv(), NODE_ENV: 'production' })
  const { code } = await gateway.exited
  t.not(code, 0)
  t.match(gateway.output(), /TRUST_PROXY=true trusts every X-Forwarded-For hop/)
  t.match(gateway.output(), /number of proxies in front of the gateway \(e\.g\. TRUST_PROXY=1\)/)
  t.match(gateway.output(), /addresses\/CIDRs/)
  t.throws(() => settingsFromEnv({ TRUST_PROXY: 'true', NODE_ENV: 'production' }), /TRUST_PROXY/)
  t.equal(settingsFromEnv({ TRUST_PROXY: '1', NODE_ENV: 'production' }).trustProxy, 1, 'a hop count is fine in production')
  t.equal(settingsFromEnv({ TRUST_PROXY: '10.0.0.0/8', NODE_ENV: 'production' }).trustProxy, '10.0.0.0/8')
})

t.test('TRUST_PROXY=true elsewhere: starts, with a warning in the log', async (t) => {
  const env = await gatewayEnv()
  const gateway = runEntry(t, 'src/gateway/server.ts', env)
  await waitForProcessHttp(gateway, `http://127.0.0.1:${env.ADMIN_PORT}/healthz`)
  const findWarning = (): { level: number, msg: string } | undefined => gateway.output().split('\n').filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number, msg: string }).find((l) => l.msg.startsWith('TRUST_PROXY=true'))
  // Log lines are batched (written at least every 200 ms): wait for the flush, not for a fixed time.
  await poll(findWarning, 2_000, 20)
  t.equal(findWarning()?.level, 40, 'logged at warn level')
  gateway.child.kill('SIGTERM')
  t.equal((await gateway.exited).code, 0)
})

t.test('a hop count trusts only the proxy\'s own entry, not what the client wrote before it', async (t) => {
  const backend = await startBackend(t)
  const config = testConfig({ 'plans.yaml': plansYaml({ anonymous: { perMinute: 5, perDay: 100 } }) })
  const remaining = async (url: string, forwardedFor: string): Promise<string | null> => {
    const res = await fetch(`${url}/v1/pets`, { headers: { 'x-forwarded-for': forwardedFor } })
    await res.arrayBuffer()
    return res.headers.get('x-ratelimit-remaining')
  }
  const hop = await startGateway(t, { config, backendUrl: backend.url, trustProxy: 1 })
  t.equal(await remaining(hop.url, '198.51.100.1, 203.0.113.9'), '4')
  t.equal(await remaining(hop.url, '198.51.100.2, 203.0.113.9'), '3', 'a new spoofed leftmost entry is the same client')
  const all = await startGateway(t, { config, backendUrl: backend.url, trustProxy: true })
  t.equal(await remaining(all.url, '198.51.100.1, 203.0.113.9'), '4')
  t.equal(await remaining(all.url, '198.51.100.2, 203.0.113.9'), '4', 'TRUST_PROXY=true: every spoofed entry is a fresh client (why it is refused)')
})
