// The webhooks from the operator's side: `webhooks test` sends each endpoint of a config directory a
// signed test event (verified by a receiver on the standardwebhooks package) and exits 1 when one is
// refused; an in-process gateway (in-process store: its memory queue) turns a consumer's month into
// quota events, the deliveries a receiver refuses to the last attempt become dead letters that the
// admin API and `webhooks dead-letters` list and `webhooks replay` queues again, counted in
// gateway_webhook_deliveries_total, with the queue's depth a gauge.
import t from 'tap'
import { cpSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { cliInProcess } from '../helpers/cli.js'
import { startGateway } from '../helpers/gateway.js'
import { bearer, DEMO_KEYS, FIXTURE_CONFIG_DIR } from '../helpers/config-fixture.js'
import { METERED_PLANS } from '../helpers/quota.js'
import { sampleValue, scrape } from '../helpers/scrape.js'
import { newSecret, startReceiver, webhooksYaml } from '../helpers/webhook-receiver.js'

const SECRET = newSecret(11)

t.test('webhooks test: a signed test event to each endpoint; a refusal exits 1', async (t) => {
  const receiver = await startReceiver(t, SECRET)
  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  writeFileSync(join(dir, 'webhooks.yaml'), webhooksYaml(receiver.url, 'CLI_WEBHOOK_SECRET'))
  const env = { CLI_WEBHOOK_SECRET: SECRET }
  const sent = await cliInProcess(['webhooks', 'test', '--config', dir], env)
  t.equal(sent.code, 0, sent.stderr)
  t.match(sent.stdout, /^hooks: delivered \(204\), webhook-id msg_[A-Za-z0-9_-]+, 1 signature\n$/)
  t.match(receiver.delivered, [{ type: 'webhook.test', data: { endpoint: 'hooks' } }], 'verified by standardwebhooks')
  t.notMatch(sent.stdout + sent.stderr, SECRET.slice(6, 20), 'the secret is not printed')

  receiver.mode = 'down'
  const refused = await cliInProcess(['webhooks', 'test', 'hooks', '--config', dir], env)
  t.same([refused.code, refused.stderr], [1, 'petstore-gateway: 1 of 1 endpoint did not accept the test event\n'])
  t.match(refused.stdout, /hooks: not delivered \(status 503\)/)
  const unknown = await cliInProcess(['webhooks', 'test', 'billing', '--config', dir], env)
  t.same([unknown.code, unknown.stderr], [1, 'petstore-gateway: no endpoint "billing" in webhooks.yaml (known: hooks)\n'])
  const noSecret = await cliInProcess(['webhooks', 'test', '--config', dir], { CLI_WEBHOOK_SECRET: undefined })
  t.same([noSecret.code, noSecret.stderr], [1, 'petstore-gateway: webhooks.yaml: endpoints[0].secret.env: environment variable CLI_WEBHOOK_SECRET is not set\n'])
})

t.test('a month\'s events in a gateway; dead letters listed and replayed from the admin API and the CLI', async (t) => {
  const receiver = await startReceiver(t, SECRET)
  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  writeFileSync(join(dir, 'plans.yaml'), METERED_PLANS)
  writeFileSync(join(dir, 'webhooks.yaml'), webhooksYaml(receiver.url, 'GW_WEBHOOK_SECRET'))
  process.env.GW_WEBHOOK_SECRET = SECRET
  t.teardown(() => { delete process.env.GW_WEBHOOK_SECRET })
  let clock = Date.parse('2030-03-10T10:00:00Z')
  // One retry 1 s after the first attempt, then a dead letter; the loop is driven by runOnce.
  const gw = await startGateway(t, { reload: { dir, watch: false }, now: () => clock, history: { flushMs: 3_600_000 }, webhooks: { retryScheduleMs: [1_000], pollMs: 3_600_000 } })

  receiver.mode = 'down'
  const statuses: number[] = []
  for (let i = 0; i < 11; i++) {
    const res = await fetch(`${gw.url}/v1/pets?limit=1`, { headers: bearer(DEMO_KEYS.pro) })
    await res.arrayBuffer()
    statuses.push(res.status)
  }
  t.same(statuses, [...Array(10).fill(200), 429], 'pro: 10 units a month')
  await gw.app.history.flush() // the month's count: 10 of 10
  await gw.app.webhooks.runOnce()
  clock += 1_000
  await gw.app.webhooks.runOnce()
  t.equal(receiver.attempts, 6, 'three events (0.8, 1, exceeded), two attempts each')

  const listed = await (await fetch(`${gw.adminUrl}/admin/webhooks/dead-letters`)).json() as { deadLetters: Array<Record<string, unknown>> }
  t.equal(listed.deadLetters.length, 3)
  t.match(listed.deadLetters.find((l) => l.type === 'quota.exceeded'), { endpoint: 'hooks', attempts: 2, lastError: 'status 503', payload: { type: 'quota.exceeded', data: { consumerId: 'demo-pro', plan: 'pro', units: 10, limit: 10, window: 'month', period: '2030-03' } } })
  const cli = await cliInProcess(['webhooks', 'dead-letters', '--admin', gw.adminUrl])
  t.equal(cli.stdout.trim().split('\n').length, 3)
  t.match(cli.stdout, /msg_\S+\tquota\.exceeded\thooks\t2 attempts\tdead 2030-03-10T10:00:01\.000Z\tstatus 503/)

  const exceeded = listed.deadLetters.find((l) => l.type === 'quota.exceeded')?.id as string
  receiver.mode = 'up'
  const replayed = await cliInProcess(['webhooks', 'replay', exceeded, '--admin', gw.adminUrl])
  t.same([replayed.code, replayed.stdout], [0, '1 dead letter queued again\n'])
  const missing = await fetch(`${gw.adminUrl}/admin/webhooks/dead-letters/${exceeded}/replay`, { method: 'POST', headers: { 'content-type': 'application/json' } })
  t.same(await missing.json(), { code: 'not_found', message: `No dead letter for event ${exceeded}`, status: 404 })
  await gw.app.webhooks.runOnce()
  t.same(receiver.delivered.map((d) => [d.id, d.type]), [[exceeded, 'quota.exceeded']], 'delivered with its webhook-id')
  const all = await (await fetch(`${gw.adminUrl}/admin/webhooks/dead-letters/all/replay`, { method: 'POST', headers: { 'content-type': 'application/json' } })).json()
  t.same(all, { id: 'all', replayed: 2 })
  await gw.app.webhooks.runOnce()
  t.same(receiver.delivered.map((d) => d.data.threshold ?? 'exceeded').sort(), [0.8, 1, 'exceeded'])

  const { text, samples } = await scrape(gw.adminUrl)
  t.same(['success', 'failure', 'dead'].map((result) => sampleValue(samples, 'gateway_webhook_deliveries_total', { event: 'quota.threshold', result })), [2, 2, 2])
  t.same(['success', 'failure', 'dead'].map((result) => sampleValue(samples, 'gateway_webhook_deliveries_total', { event: 'quota.exceeded', result })), [1, 1, 1])
  t.equal(sampleValue(samples, 'gateway_webhook_queue_depth'), 0)
  const view = await (await fetch(`${gw.adminUrl}/admin/webhooks`)).json()
  t.same(view, { endpoints: [{ name: 'hooks', url: receiver.url, events: ['quota.threshold', 'quota.exceeded', 'key.banned', 'key.expiring'], secrets: 1 }], thresholds: [0.8, 1], overageSteps: [], expiringDays: [7, 1], queueDepth: 0 })
  t.notMatch(text + gw.rawLogs(), SECRET.slice(6, 20), 'the secret is in no metric and no log line')
})
