// keys rotate / show / reset and bans through the admin API, against real gateways: the rotated
// keys.yaml keeps its comments and order, a watching gateway reloads it, both keys share the
// consumer's windows, and every refusal is one clear line with exit 1.
import { cpSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { parseGrace, rotateKeysText } from '../../src/cli/rotate.js'
import { keyDigest } from '../../src/gateway/auth/bearer.js'
import { loadConfigDir } from '../../src/gateway/config/read-files.js'
import { cli, cliInProcess } from '../helpers/cli.js'
import { startGateway } from '../helpers/gateway.js'
import { bearer, DEMO_KEYS, FIXTURE_CONFIG_DIR, plansYaml, testConfig } from '../helpers/config-fixture.js'
import { until } from '../helpers/poll.js'
import { PROCESS_START_TIMEOUT_MS } from '../helpers/ports.js'

const ISO_SECONDS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/


async function remaining (url: string, key: string): Promise<number> {
  const res = await fetch(`${url}/v1/store/orders`, { headers: bearer(key) })
  await res.arrayBuffer()
  if (res.status !== 200) throw new Error(`status ${res.status}`)
  return Number(res.headers.get('x-ratelimit-remaining'))
}

t.test('keys rotate: new key for the same consumer, old one kept for the grace, picked up by a watching gateway, windows continue', async (t) => {
  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  const original = readFileSync(join(dir, 'keys.yaml'), 'utf8')
  const clock = { now: Date.now() }
  const gw = await startGateway(t, { reload: { dir }, now: () => clock.now })
  const before = [await remaining(gw.url, DEMO_KEYS.free), await remaining(gw.url, DEMO_KEYS.free)]
  t.same(before, [59, 58])

  const started = Date.now()
  const res = await cli(['keys', 'rotate', '--id', 'demo-free', '--grace', '10m', '--config', dir])
  t.equal(res.code, 0, res.stderr)
  const key = /^API key \(shown once, store it now\): (psk_[A-Za-z0-9]{40})\n/.exec(res.stdout)?.[1]
  t.ok(key, 'the new key, printed once')
  t.equal(res.stdout.split(key!).length, 2, 'exactly once')
  const newId = /added "(demo-free-\d{14})" for consumer "demo-free"/.exec(res.stdout)?.[1]
  t.ok(newId, `derived id ${newId}`)

  const text = readFileSync(join(dir, 'keys.yaml'), 'utf8')
  const expiresAt = /^ {4}expiresAt: (\S+)$/m.exec(text)?.[1] ?? ''
  t.match(expiresAt, ISO_SECONDS)
  const graceEnd = Date.parse(expiresAt)
  t.ok(graceEnd >= Math.floor((started + 600_000) / 1000) * 1000 && graceEnd <= Date.now() + 600_000, 'old key expires after the 10 minutes of grace')
  t.match(res.stdout, `"demo-free" expires at ${expiresAt}`)
  t.equal(text, original.replace('    plan: free\n',
    `    plan: free\n    expiresAt: ${expiresAt}\n  - id: ${newId}\n    sha256: ${keyDigest(key!)}\n    consumer: demo-free\n    plan: free\n`),
  'comments, order and every other entry unchanged; the new entry right after the old one')
  t.same(readFileSync(join(dir, 'plans.yaml'), 'utf8'), readFileSync(join(FIXTURE_CONFIG_DIR, 'plans.yaml'), 'utf8'))

  // A watched change is applied once the directory has been quiet for the quiet period (2 s), by a
  // config worker thread started for the load (its modules loaded): the wait has a process start's
  // deadline and tells a hang from a late reload only (7 s was missed at load 20, 30 s at load 26 with
  // a CPU hog, by reloads that came).
  const rotated = Date.now()
  await until('the gateway reloads the rotated file', () => gw.app.gatewayConfig.current.keysById.has(newId!), PROCESS_START_TIMEOUT_MS)
  t.comment(`the rotated file reloaded ${Date.now() - rotated} ms after the command returned`)
  t.same([await remaining(gw.url, key!), await remaining(gw.url, DEMO_KEYS.free), await remaining(gw.url, key!)], [57, 56, 55],
    'both keys spend one consumer\'s window: it continues across the rotation')
  const consumer = await (await fetch(`${gw.adminUrl}/admin/consumers/${newId}`)).json() as Record<string, unknown>
  t.match(consumer, {
    consumerId: 'demo-free',
    credentials: [{ id: 'demo-free', expiresAt: new Date(graceEnd).toISOString(), expired: false }, { id: newId, expiresAt: null, expired: false }],
    usage: { minute: { count: 5 }, day: { count: 5 } }
  })

  // One clock for the whole gateway: ten minutes on, the minute window is empty again (remaining
  // 59) while the day window still holds the consumer's 5 requests (both keys').
  clock.now = graceEnd - 1000
  t.equal(await remaining(gw.url, DEMO_KEYS.free), 59, 'the old key still works one second before its grace ends')
  const dayCount = async (): Promise<unknown> => ((await (await fetch(`${gw.adminUrl}/admin/consumers/demo-free`)).json()) as { usage: { day: { count: number } } }).usage.day.count
  t.equal(await dayCount(), 6, 'the day window goes on across the rotation and the ten minutes')
  const later = await (await fetch(`${gw.adminUrl}/admin/consumers/demo-free`)).json() as { credentials: Array<{ expired: boolean }> }
  t.same(later.credentials.map((c) => c.expired), [false, false])
  clock.now = graceEnd
  const ended = await (await fetch(`${gw.adminUrl}/admin/consumers/demo-free`)).json() as { credentials: Array<{ expired: boolean }> }
  t.same(ended.credentials.map((c) => c.expired), [true, false], 'at the end of the grace the old key counts as expired')
  const refused = await fetch(`${gw.url}/v1/store/orders`, { headers: bearer(DEMO_KEYS.free) })
  t.equal(refused.status, 401, 'the old key is refused the instant its grace ends, with no reload')
  t.same(await refused.json(), { code: 'key_expired', message: `API key expired at ${new Date(graceEnd).toISOString()}`, status: 401 })
  t.equal(refused.headers.get('www-authenticate'), 'Bearer realm="petstore", error="invalid_token", error_description="The API key expired"')
  t.equal(await remaining(gw.url, key!), 58, 'the new key goes on with the consumer\'s window (the refused request counted against the address)')
  t.equal(await dayCount(), 7, 'and with its day window')

  const again = await cliInProcess(['keys', 'rotate', '--id', 'demo-free', '--grace', '30d', '--config', dir])
  t.equal(again.code, 0)
  t.match(again.stdout, `"demo-free" expires at ${expiresAt}`, 'a second rotation never extends the old key')
  t.equal(loadConfigDir(dir).keysById.size, 6)
})

t.test('keys rotate keeps a flow-style entry one line, with its limits, scopes and comments', async (t) => {
  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  const digest = 'a'.repeat(64)
  const original = [
    '# partner keys',
    'keys:',
    `  - { id: bigco, sha256: ${digest}, plan: enterprise, limits: { perMinute: 5000, perDay: 2000000 }, scopes: [read] } # since 2029`,
    '  # the last one',
    `  - { id: other, sha256: ${'b'.repeat(64)}, consumer: other-co, plan: pro }`,
    ''
  ].join('\n')
  writeFileSync(join(dir, 'keys.yaml'), original)
  const res = await cliInProcess(['keys', 'rotate', '--id', 'other', '--config', dir])
  t.equal(res.code, 0, res.stderr)
  const key = /(psk_[A-Za-z0-9]{40})/.exec(res.stdout)?.[1] ?? ''
  const newId = /added "(other-co-\d{14})" for consumer "other-co"/.exec(res.stdout)?.[1]
  t.ok(newId, 'the derived id starts with the consumer')
  const text = readFileSync(join(dir, 'keys.yaml'), 'utf8')
  const expiresAt = /expiresAt: (\S+) \}/.exec(text)?.[1] ?? ''
  t.ok(Math.abs(Date.parse(expiresAt) - (Date.now() + 7 * 86_400_000)) < 5000, 'default grace: 7 days')
  // The one normalisation of the yaml library: flow sequences get the padding flow maps have.
  t.equal(text, original.replace('[read]', '[ read ]').replace(`consumer: other-co, plan: pro }\n`,
    `consumer: other-co, plan: pro, expiresAt: ${expiresAt} }\n  - { id: ${newId}, sha256: ${keyDigest(key)}, consumer: other-co, plan: pro }\n`))

  const big = await cliInProcess(['keys', 'rotate', '--id', 'bigco', '--grace', '36h', '--config', dir])
  t.equal(big.code, 0, big.stderr)
  const bigId = /added "(bigco-\d{14})"/.exec(big.stdout)?.[1]
  const record = loadConfigDir(dir).keysById.get(bigId!)
  t.match(record, { consumerId: 'bigco', plan: 'enterprise', limits: { perMinute: 5000, perDay: 2000000 }, scopes: ['read'] }, 'same plan, limits and scopes')
  t.match(readFileSync(join(dir, 'keys.yaml'), 'utf8'), `# since 2029\n  - { id: ${bigId}, sha256: `)
})

t.test('keys rotate refuses bad input with exit 1 and leaves the file untouched', async (t) => {
  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  const withDisabled = readFileSync(join(dir, 'keys.yaml'), 'utf8') + `  - id: old\n    sha256: ${'d'.repeat(64)}\n    plan: pro\n    disabled: true\n`
  writeFileSync(join(dir, 'keys.yaml'), withDisabled)
  for (const [args, message] of [
    [['--id', 'nobody'], 'no key with id "nobody" in keys.yaml'],
    [['--id', 'old'], 'key "old" is disabled: issue a new key with keys create instead of rotating it'],
    [['--id', 'demo-pro', '--grace', '7'], '--grace must be a whole number of s, m, h or d (e.g. 30m, 7d; at most 3650d), got "7"'],
    [['--id', 'demo-pro', '--grace=-1d'], '--grace must be a whole number of s, m, h or d (e.g. 30m, 7d; at most 3650d), got "-1d"'],
    [['--id', 'demo-pro', '--grace', '9999d'], '--grace must be a whole number of s, m, h or d (e.g. 30m, 7d; at most 3650d), got "9999d"'],
    [[], 'keys rotate needs --id ID (the key to replace)']
  ] as const) {
    const res = await cliInProcess(['keys', 'rotate', ...args, '--config', dir])
    t.equal(res.code, 1, message)
    t.match(res.stderr, `petstore-gateway: ${message}`)
    t.equal(res.stdout, '', 'no key printed')
    t.equal(readFileSync(join(dir, 'keys.yaml'), 'utf8'), withDisabled, 'file untouched')
  }
  writeFileSync(join(dir, 'plans.yaml'), 'plans: {}\n')
  const broken = await cliInProcess(['keys', 'rotate', '--id', 'demo-pro', '--config', dir])
  t.equal(broken.code, 1)
  t.match(broken.stderr, 'petstore-gateway: plans.yaml: missing field "anonymous"')
  t.equal(readFileSync(join(dir, 'keys.yaml'), 'utf8'), withDisabled)
})

t.test('keys show and keys reset reach the running gateway\'s admin API', async (t) => {
  const plans = plansYaml({ free: { perMinute: 1, perDay: 100 }, ban: { threshold: 1 } })
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': plans }), adminToken: 'tok-9' })
  const statuses: number[] = []
  for (let i = 0; i < 3; i++) {
    const res = await fetch(`${gw.url}/v1/store/orders`, { headers: bearer(DEMO_KEYS.free) })
    statuses.push(res.status)
    await res.arrayBuffer()
  }
  t.same(statuses, [200, 429, 429])
  const env = { ADMIN_TOKEN: 'tok-9' }
  const admin = ['--admin', gw.adminUrl]

  const show = await cliInProcess(['keys', 'show', 'demo-free', ...admin], env)
  t.equal(show.code, 0, show.stderr)
  const lines = show.stdout.split('\n')
  t.equal(lines[0], 'consumer demo-free: plan free (1/min, 100/day)')
  t.equal(lines[1], 'credentials:')
  t.equal(lines[2], '  demo-free\tactive\tread,write\tnever expires')
  t.match(lines[3], /^usage: minute 1\/1 \(0 left, resets \S+Z\); day 1\/100 \(99 left, resets \S+Z\)$/)
  t.match(lines[4], /^ban: banned until \S+Z \((89\d|900) s left\); escalation level 0$/)
  t.notMatch(show.stdout, /[0-9a-f]{64}/)
  const json = await cliInProcess(['keys', 'show', 'demo-free', '--json', ...admin], env)
  t.match(JSON.parse(json.stdout), { consumerId: 'demo-free', ban: { escalationLevel: 0 } })

  const reset = await cliInProcess(['keys', 'reset', 'demo-free', ...admin], env)
  t.equal(reset.code, 0, reset.stderr)
  t.match(reset.stdout, /^consumer demo-free reset: cleared 1 requests this minute, 1 today; banned until \S+Z \(\d+ s left\); escalation level 0 before the reset\n$/)
  const res = await fetch(`${gw.url}/v1/store/orders`, { headers: bearer(DEMO_KEYS.free) })
  t.equal(res.status, 200, 'banned → keys reset → 200')
  await res.arrayBuffer()
  t.match(gw.logs.find((l) => l.msg === 'consumer reset'), { consumerId: 'demo-free', who: 'admin-token' })
  t.same(await cliInProcess(['keys', 'reset', 'demo-pro', ...admin], env), {
    code: 0, stdout: 'consumer demo-pro reset: cleared 0 requests this minute, 0 today; not banned; escalation level none before the reset\n', stderr: ''
  })

  const failures: Array<[string[], Record<string, string | undefined>, string]> = [
    [['keys', 'show', 'nobody', ...admin], env, 'No consumer or key with id nobody'],
    [['keys', 'reset', 'nobody', ...admin], env, 'No consumer or key with id nobody'],
    [['keys', 'show', 'bad/id', ...admin], env, '"bad/id" is not a key or consumer id'],
    [['keys', 'show', 'demo-free', ...admin], { ADMIN_TOKEN: undefined }, `the admin API at ${gw.adminUrl} refused the request: set ADMIN_TOKEN to the gateway's admin token`],
    [['keys', 'reset', 'demo-free', ...admin], { ADMIN_TOKEN: 'wrong' }, `the admin API at ${gw.adminUrl} refused the request`]
  ]
  for (const [args, envOf, message] of failures) {
    const failed = await cliInProcess(args, envOf)
    t.equal(failed.code, 1, args.join(' '))
    t.match(failed.stderr, `petstore-gateway: ${message}`)
    t.equal(failed.stdout, '')
  }

  await gw.close()
  const down = await cliInProcess(['keys', 'show', 'demo-free', ...admin], env)
  t.same(down, { code: 1, stdout: '', stderr: `petstore-gateway: cannot reach the gateway's admin API at ${gw.adminUrl} (ECONNREFUSED): is the gateway running? Point --admin at its admin port.\n` })
})

t.test('bans list and lift through the admin API, for the consumer of a credential', async (t) => {
  const plans = plansYaml({ free: { perMinute: 1, perDay: 100 }, ban: { threshold: 1 } })
  const keys = readFileSync(join(FIXTURE_CONFIG_DIR, 'keys.yaml'), 'utf8') + '  - { id: free-2, sha256: ' + keyDigest('psk_second_free_credential_0123456789') + ', consumer: demo-free, plan: free }\n'
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': plans, 'keys.yaml': keys }) })
  for (const key of [DEMO_KEYS.free, 'psk_second_free_credential_0123456789', DEMO_KEYS.free]) await (await fetch(`${gw.url}/v1/store/orders`, { headers: bearer(key) })).arrayBuffer()
  const env = { REDIS_URL: '' }
  const admin = ['--admin', gw.adminUrl]
  const list = await cliInProcess(['bans', 'list', ...admin], env)
  t.equal(list.code, 0, list.stderr)
  t.match(list.stdout, /^demo-free\tuntil \d{4}-\d\d-\d\dT[\d:.]+Z\t\((89\d|900) s left\)\n$/, 'the second credential\'s 429 banned the consumer')
  t.same(await cliInProcess(['bans', 'lift', 'free-2', ...admin], env), { code: 0, stdout: 'ban on demo-free lifted\n', stderr: '' })
  t.same(await cliInProcess(['bans', 'list', ...admin], env), { code: 0, stdout: 'no bans in force\n', stderr: '' })
  t.same(await cliInProcess(['bans', 'lift', 'demo-free', ...admin], env), { code: 0, stdout: 'demo-free is not banned: no ban to lift\n', stderr: '' },
    'lifting a ban that is not there says so and exits 0 (it exited 1)')
  t.match(gw.logs.find((l) => l.msg === 'ban lifted'), { audit: true, consumerId: 'demo-free', who: 'loopback' })
})

t.test('rotateKeysText: unique derived ids, date-only expiry kept when earlier, grace units', async (t) => {
  const now = Date.parse('2030-05-01T10:20:30.456Z')
  const text = [
    'keys:',
    `  - { id: a, sha256: ${'a'.repeat(64)}, plan: pro, expiresAt: 2030-05-03 }`,
    `  - { id: a-20300501102030, sha256: ${'b'.repeat(64)}, consumer: a, plan: pro }`,
    ''
  ].join('\n')
  const first = rotateKeysText(text, { id: 'a', sha256: 'c'.repeat(64), graceMs: parseGrace('7d'), now })
  t.equal(first.newId, 'a-20300501102030-2', 'a taken id gets a suffix')
  t.equal(first.oldExpiresAt, Date.parse('2030-05-03T00:00:00Z'), 'an earlier date-only expiry stays')
  t.match(first.text, '  - { id: a, sha256: ' + 'a'.repeat(64) + ', plan: pro, expiresAt: 2030-05-03 }\n', 'and is not rewritten')
  const second = rotateKeysText(first.text, { id: 'a', sha256: 'd'.repeat(64), graceMs: parseGrace('90s'), now })
  t.equal(second.newId, 'a-20300501102030-3')
  t.equal(second.text.match(/expiresAt: \S+ \}/g)?.[0], 'expiresAt: 2030-05-01T10:22:00Z }', 'grace end truncated to the second')
  t.same([parseGrace('30s'), parseGrace('15m'), parseGrace('12h'), parseGrace('0d')], [30_000, 900_000, 43_200_000, 0])
  const long = 'x'.repeat(64)
  const longText = `keys:\n  - { id: ${long}, sha256: ${'e'.repeat(64)}, plan: pro }\n`
  t.equal(rotateKeysText(longText, { id: long, sha256: 'f'.repeat(64), graceMs: 0, now }).newId.length, 61, 'a long consumer id is shortened to leave room for -2…')
  t.throws(() => rotateKeysText('keys: [\n', { id: 'a', sha256: 'f'.repeat(64), graceMs: 0, now }), { message: /^keys\.yaml: / })
  t.throws(() => rotateKeysText('plans: {}\n', { id: 'a', sha256: 'f'.repeat(64), graceMs: 0, now }), { message: 'keys.yaml: no "keys:" list' })
})
