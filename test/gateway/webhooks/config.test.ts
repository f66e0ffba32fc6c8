// webhooks.yaml in the config load: optional (no file, no webhooks, the version of the three files
// unchanged), every bad field refused with the file and the field named (an unknown event, a plain
// http:// URL off loopback, a missing secret, a secret not in whsec_ form — never its value), and on a
// reload of a bad file the last good config stays in force, endpoints and all.
import t from 'tap'
import { cpSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { ConfigError, parseConfig } from '../../../src/gateway/config/loader.js'
import type { SecretReader } from '../../../src/gateway/webhooks/config.js'
import { startGateway } from '../../helpers/gateway.js'
import { configTexts, FIXTURE_CONFIG_DIR } from '../../helpers/config-fixture.js'
import { newSecret } from '../../helpers/webhook-receiver.js'

const SECRET = newSecret()
const secrets = (env: Record<string, string>, files: Record<string, string> = {}): SecretReader => ({
  env: (name) => env[name],
  file: (path) => {
    const text = files[path]
    if (text === undefined) throw Object.assign(new Error('no such file'), { code: 'ENOENT' })
    return text
  }
})

function problems (yaml: string, reader = secrets({ HOOK_SECRET: SECRET })): readonly string[] {
  try {
    parseConfig({ ...configTexts(), 'webhooks.yaml': yaml }, 0, reader)
  } catch (err) {
    if (err instanceof ConfigError) return err.problems
    throw err
  }
  return []
}

const endpoint = (fields: string): string => `endpoints:\n  - { name: billing, ${fields} }\n`
const GOOD = endpoint(`url: "https://billing.example.com/hooks", events: [quota.threshold], secret: { env: HOOK_SECRET }`)

t.test('no webhooks.yaml: no webhooks, and the version is the three files\' as before', async (t) => {
  const snapshot = parseConfig(configTexts())
  t.equal(snapshot.webhooks, undefined)
  const withFile = parseConfig({ ...configTexts(), 'webhooks.yaml': GOOD }, 0, secrets({ HOOK_SECRET: SECRET }))
  t.not(withFile.version, snapshot.version, 'the file is part of the version')
})

t.test('a good file: endpoints with their secrets read, defaults for thresholds and look-aheads', async (t) => {
  const snapshot = parseConfig({ ...configTexts(), 'webhooks.yaml': `${endpoint('url: "http://127.0.0.1:9/x", events: [quota.exceeded, key.banned], secret: { file: /run/s }, previousSecret: { env: OLD }')}quota: { thresholds: [1.0, 0.5], overageSteps: [2, 1.5] }\n` }, 0,
    secrets({ OLD: newSecret(9) }, { '/run/s': `${SECRET}\n` }))
  t.same(snapshot.webhooks, {
    endpoints: [{ name: 'billing', url: 'http://127.0.0.1:9/x', events: ['quota.exceeded', 'key.banned'], secrets: [SECRET, newSecret(9)] }],
    thresholds: [0.5, 1],
    overageSteps: [1.5, 2],
    expiringDays: [7, 1]
  })
  t.ok(Object.isFrozen(snapshot.webhooks?.endpoints[0]?.secrets))
})

t.test('each bad field is refused, naming the file and the field', async (t) => {
  t.same(problems(endpoint('url: "https://a.example/h", events: [quota.treshold], secret: { env: HOOK_SECRET }')),
    ['webhooks.yaml: endpoints[0].events[0]: must be one of "quota.threshold", "quota.exceeded", "key.banned", "key.expiring"'])
  t.same(problems(endpoint('url: "http://billing.example.com/h", events: [quota.threshold], secret: { env: HOOK_SECRET }')),
    ['webhooks.yaml: endpoints[0].url: must be https:// (plain http:// only to a loopback address, not "billing.example.com")'])
  t.same(problems(endpoint('url: "https://user:pw@a.example/h", events: [quota.threshold], secret: { env: HOOK_SECRET }')),
    ['webhooks.yaml: endpoints[0].url: must not carry credentials (sign with the secret instead)'])
  t.same(problems(endpoint('url: "billing.example.com/h", events: [quota.threshold], secret: { env: HOOK_SECRET }')),
    ['webhooks.yaml: endpoints[0].url: is not a URL'], 'a URL without its scheme')
  t.same(problems(endpoint('url: "ftp://a.example/h", events: [quota.threshold], secret: { env: HOOK_SECRET }')),
    ['webhooks.yaml: endpoints[0].url: must be https:// (not ftp:)'])
  t.same(problems(endpoint('url: "https://a.example/h", events: [quota.threshold], secret: { env: NOT_SET }')),
    ['webhooks.yaml: endpoints[0].secret.env: environment variable NOT_SET is not set'])
  t.same(problems(endpoint('url: "https://a.example/h", events: [quota.threshold], secret: { file: /nope }')),
    ['webhooks.yaml: endpoints[0].secret.file: cannot read /nope: ENOENT'])
  t.same(problems(endpoint('url: "https://a.example/h", events: [quota.threshold]')),
    ['webhooks.yaml: endpoints[0]: missing field "secret"'])
  const wrong = problems(endpoint('url: "https://a.example/h", events: [quota.threshold], secret: { env: HOOK_SECRET }'), secrets({ HOOK_SECRET: 'hunter2-not-a-whsec' }))
  t.same(wrong, ['webhooks.yaml: endpoints[0].secret: the secret must be "whsec_" followed by the base64 of at least 24 bytes'])
  t.notMatch(wrong.join(), /hunter2/, 'the value read is never in the message')
  t.same(problems(`${GOOD}  - { name: billing, url: "https://b.example/h", events: [key.banned], secret: { env: HOOK_SECRET } }\n`),
    ['webhooks.yaml: endpoints[1].name: duplicate endpoint "billing"'])
  t.same(problems('endpoints: []\nquota: { thresholds: [1.2] }\n'), ['webhooks.yaml: quota.thresholds[0]: must be <= 1'])
  t.same(problems('endpoints: []\nretries: 3\n'), ['webhooks.yaml: unknown field "retries"'])
})

t.test('a secret file read from disk (the gateway\'s own reader): its text trimmed; a file too big to be a secret is refused, never read into the message', async (t) => {
  const dir = t.testdir({ secret: `${SECRET}\n`, big: `${SECRET}\n${'x'.repeat(5000)}` })
  const read = parseConfig({ ...configTexts(), 'webhooks.yaml': endpoint(`url: "https://a.example/h", events: [quota.threshold], secret: { file: ${join(dir, 'secret')} }`) })
  t.same(read.webhooks?.endpoints[0]?.secrets, [SECRET])
  const big = join(dir, 'big')
  let refused: readonly string[] = []
  try {
    parseConfig({ ...configTexts(), 'webhooks.yaml': endpoint(`url: "https://a.example/h", events: [quota.threshold], secret: { file: ${big} }`) })
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    refused = err.problems
  }
  t.same(refused, [`webhooks.yaml: endpoints[0].secret.file: cannot read ${big}: larger than 4096 bytes`])
})

t.test('a reload of a bad webhooks.yaml keeps the last good config, its endpoints included', async (t) => {
  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  process.env.WEBHOOK_CONFIG_TEST_SECRET = SECRET
  t.teardown(() => { delete process.env.WEBHOOK_CONFIG_TEST_SECRET })
  writeFileSync(join(dir, 'webhooks.yaml'), endpoint('url: "https://billing.example.com/h", events: [quota.threshold], secret: { env: WEBHOOK_CONFIG_TEST_SECRET }'))
  const gw = await startGateway(t, { reload: { dir, watch: false } })
  const before = gw.app.gatewayConfig.current
  t.equal(before.webhooks?.endpoints[0]?.url, 'https://billing.example.com/h', 'loaded at start-up')

  writeFileSync(join(dir, 'webhooks.yaml'), endpoint('url: "http://billing.example.com/h", events: [quota.threshold], secret: { env: WEBHOOK_CONFIG_TEST_SECRET }'))
  const result = await gw.app.configReloader.reload('test')
  t.same(result, { ok: false, problems: ['webhooks.yaml: endpoints[0].url: must be https:// (plain http:// only to a loopback address, not "billing.example.com")'] })
  t.equal(gw.app.gatewayConfig.current, before, 'the last good snapshot stays in force')

  writeFileSync(join(dir, 'webhooks.yaml'), endpoint('url: "https://billing.example.com/v2", events: [quota.threshold], secret: { env: WEBHOOK_CONFIG_TEST_SECRET }'))
  t.match(await gw.app.configReloader.reload('test'), { ok: true, changed: true })
  t.equal(gw.app.gatewayConfig.current.webhooks?.endpoints[0]?.url, 'https://billing.example.com/v2', 'a good file reloads')
  t.notMatch(gw.rawLogs(), SECRET.slice(6, 20), 'the secret is in no log line')
})
