// The promise end to end, with real gateway processes on one real redis-server and a receiver that
// verifies with the `standardwebhooks` package. Two gateways share a consumer (demo-pro, 10 units a
// month) driven across 80 % and 100 % of its month and refused past it, on both: exactly one
// quota.threshold per threshold and one quota.exceeded. A gateway SIGKILLed while its delivery is in
// flight: the gateway started again delivers the event (XAUTOCLAIM), with the same webhook-id, and
// counting the same month emits nothing again.
import t from 'tap'
import { cpSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { startBackend } from '../../helpers/backend.js'
import { bearer, DEMO_KEYS, FIXTURE_CONFIG_DIR } from '../../helpers/config-fixture.js'
import { sleep, until } from '../../helpers/poll.js'
import { gatewayProcessEnv, startGatewayProcess } from '../../helpers/processes.js'
import { startRedis } from '../../helpers/redis.js'
import { newSecret, startReceiver, webhooksYaml, type Receiver } from '../../helpers/webhook-receiver.js'

const SECRET = newSecret(5)
const PLANS = [
  'plans:',
  '  free: { perMinute: 10, perDay: 10, perMonth: 10 }',
  '  pro: { perMinute: 10, perDay: 10, perMonth: 10 }',
  '  business: { perMinute: 1000, perDay: 100000 }',
  '  enterprise: { custom: true }',
  'anonymous: { perMinute: 30, perDay: 300 }',
  ''
].join('\n')

async function status (port: number, key: string): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${port}/v1/pets?limit=1`, { headers: bearer(key) })
  await res.arrayBuffer()
  return res.status
}

function summary (receiver: Receiver, consumerId: string): string[] {
  return receiver.delivered.filter((d) => d.data.consumerId === consumerId).map((d) => `${d.type}${d.data.threshold === undefined ? '' : ` ${String(d.data.threshold)}`}`).sort()
}

t.test('two gateways, a restart and a kill: one event per threshold, one quota.exceeded, each delivered once', async (t) => {
  const redis = await startRedis(t)
  const backend = await startBackend(t)
  const receiver = await startReceiver(t, SECRET)
  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  writeFileSync(join(dir, 'plans.yaml'), PLANS)
  writeFileSync(join(dir, 'webhooks.yaml'), webhooksYaml(receiver.url, 'WEBHOOK_TEST_SECRET'))
  const env = (port: number, adminPort: number): Record<string, string> => gatewayProcessEnv(
    { port, adminPort, backendUrl: backend.url, configDir: dir, redisUrl: redis.url },
    { WEBHOOK_TEST_SECRET: SECRET, HISTORY_FLUSH_MS: '100', WEBHOOK_POLL_MS: '50', WEBHOOK_CLAIM_IDLE_MS: '1000' })
  const started = performance.now()
  const mark = (what: string): void => { t.comment(`${what}: ${Math.round(performance.now() - started)} ms`) }
  const [a, b] = await Promise.all([startGatewayProcess(t, env), startGatewayProcess(t, env)])
  mark('two gateways ready')

  // 8 of 10 units, alternating between the gateways: 80 %.
  const statuses: number[] = []
  for (let i = 0; i < 8; i++) statuses.push(await status(i % 2 === 0 ? a.port : b.port, DEMO_KEYS.pro))
  await until('quota.threshold 0.8 delivered', () => summary(receiver, 'demo-pro').includes('quota.threshold 0.8') || undefined, 15_000)
  // 100 %, then refusals on both.
  for (let i = 8; i < 14; i++) statuses.push(await status(i % 2 === 0 ? a.port : b.port, DEMO_KEYS.pro))
  t.same(statuses, [...Array(10).fill(200), 429, 429, 429, 429])
  await until('quota.exceeded delivered', () => summary(receiver, 'demo-pro').includes('quota.exceeded') || undefined, 15_000)
  mark('quota.exceeded delivered')
  await sleep(1_000) // several flushes and delivery rounds of both gateways more
  t.same(summary(receiver, 'demo-pro'), ['quota.exceeded', 'quota.threshold 0.8', 'quota.threshold 1'], 'exactly one event per threshold and one quota.exceeded')
  const byId = new Set(receiver.delivered.map((d) => d.id))
  t.equal(byId.size, receiver.delivered.length, 'each delivered once by id')
  t.equal(receiver.refused, 0, 'every signature verified by standardwebhooks')
  t.match(receiver.delivered.find((d) => d.type === 'quota.exceeded')?.data, { consumerId: 'demo-pro', plan: 'pro', window: 'month', units: 10, limit: 10 })
  t.notMatch(JSON.stringify(receiver.delivered), /psk_|sha256|[0-9a-f]{64}/, 'no credential or digest in any payload')

  // A kill mid-delivery: one gateway left, the receiver holds its delivery, the gateway dies (SIGKILL).
  b.proc.child.kill('SIGTERM')
  await b.proc.exited
  receiver.mode = 'hold'
  const held = receiver.nextAttempt()
  for (let i = 0; i < 8; i++) await status(a.port, DEMO_KEYS.free)
  await held
  const heldId = receiver.attemptIds.at(-1)
  a.proc.child.kill('SIGKILL')
  await a.proc.exited
  receiver.mode = 'up'
  // The gateway started again delivers the event its predecessor left in flight, once idle long enough…
  const restarted = await startGatewayProcess(t, env)
  mark('restarted')
  await until('the held event delivered by the restarted gateway', () => summary(receiver, 'demo-free').length > 0 || undefined, 15_000)
  t.same(summary(receiver, 'demo-free'), ['quota.threshold 0.8'])
  t.equal(receiver.delivered.find((d) => d.data.consumerId === 'demo-free')?.id, heldId, 'the same webhook-id as the attempt in flight when its gateway died')
  // …and, counting the same month again, finds every once-key taken: nothing is emitted twice.
  t.equal(await status(restarted.port, DEMO_KEYS.pro), 429)
  t.equal(await status(restarted.port, DEMO_KEYS.free), 200)
  await sleep(1_000)
  t.same(summary(receiver, 'demo-pro'), ['quota.exceeded', 'quota.threshold 0.8', 'quota.threshold 1'], 'nothing emitted again after the restart')
  t.same(summary(receiver, 'demo-free'), ['quota.threshold 0.8'])
  mark('delivered after the kill')
  t.comment(`receiver: ${receiver.attempts} attempts, ${receiver.delivered.length} delivered`)
})
