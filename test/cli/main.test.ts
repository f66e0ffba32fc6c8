// The command line's commands, most through its exported `run` in this process (the same code without
// a ~2 s process start each, slower still on a loaded machine); as a real process where that is the
// point: a key created and accepted by a gateway, a refusal's one line and exit 1, a key hashed from stdin.
import t from 'tap'
import { once } from 'node:events'
import { chmodSync, cpSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { join } from 'node:path'
import { writeFileAtomic } from '../../src/cli/atomic-write.js'
import { keyDigest } from '../../src/gateway/auth/bearer.js'
import { loadConfigDir } from '../../src/gateway/config/read-files.js'
import { startGateway } from '../helpers/gateway.js'
import { bearer, DEMO_KEYS, FIXTURE_CONFIG_DIR, plansYaml, testConfig } from '../helpers/config-fixture.js'
import { startRedis } from '../helpers/redis.js'
import { cli, cliInProcess } from '../helpers/cli.js'
import { freePort } from '../helpers/ports.js'

t.test('keys create prints the key once and a keys.yaml entry that the gateway accepts', async (t) => {
  const { code, stdout } = await cli(['keys', 'create', '--id', 'acme-prod', '--plan', 'pro'])
  t.equal(code, 0)
  const key = /API key \(shown once, store it now\): (psk_[A-Za-z0-9]{40})\n/.exec(stdout)?.[1]
  t.ok(key, 'a psk_ key with 40 base62 characters')
  const entry = stdout.slice(stdout.indexOf('keys.yaml entry:\n') + 'keys.yaml entry:\n'.length)
  t.equal(entry, `  - id: acme-prod\n    sha256: ${keyDigest(key!)}\n    plan: pro\n`)

  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  writeFileSync(join(dir, 'keys.yaml'), `keys:\n${entry}`)
  const gw = await startGateway(t, { config: loadConfigDir(dir) })
  const res = await fetch(`${gw.url}/v1/pets`, { headers: bearer(key!) })
  t.equal(res.status, 200)
  await res.arrayBuffer()

  const again = await cliInProcess(['keys', 'create', '--id', 'acme-prod', '--plan', 'pro'])
  t.not(/psk_[A-Za-z0-9]{40}/.exec(again.stdout)?.[0], key, 'every key is new')
})

t.test('keys create for a custom plan needs limits and writes them', async (t) => {
  const missing = await cli(['keys', 'create', '--id', 'bigco', '--plan', 'enterprise'])
  t.same(missing, { code: 1, stdout: '', stderr: 'petstore-gateway: plan "enterprise" is custom: give --per-minute and --per-day (petstore-gateway keys create --help)\n' },
    'one line, exit 1, as a real process')
  const ok = await cliInProcess(['keys', 'create', '--id', 'bigco', '--plan', 'enterprise', '--per-minute', '5000', '--per-day', '2000000'])
  t.equal(ok.code, 0)
  t.match(ok.stdout, '    plan: enterprise\n    limits: { perMinute: 5000, perDay: 2000000 }\n')
})

t.test('keys create refuses what keys.yaml would refuse, in one line with exit 1', async (t) => {
  const help = ' (petstore-gateway keys create --help)'
  for (const [args, line] of [
    [['--id', 'x', '--plan', 'gold'], 'unknown plan "gold" (known: free, pro, business, enterprise)'],
    [['--id', 'demo-pro', '--plan', 'pro'], 'a key with id "demo-pro" already exists'],
    [['--id', 'bad id', '--plan', 'pro'], `--id is required: letters, digits, . _ - (at most 64)${help}`],
    [['--id', 'x', '--plan', 'pro', '--per-minute', '0', '--per-day', '5'], `--per-minute must be a positive integer, got "0"${help}`],
    [['--id', 'x', '--plan', 'pro', '--per-minute', '5'], `--per-minute and --per-day go together${help}`],
    [['--id', 'x', '--plan', 'pro', '--colour'], `keys create: unknown option --colour${help}`],
    [['--id'], `keys create: --id needs a value${help}`]
  ] as const) {
    const res = await cliInProcess(['keys', 'create', ...args])
    t.same(res, { code: 1, stdout: '', stderr: `petstore-gateway: ${line}\n` }, args.join(' '))
  }
})

t.test('keys hash digests a key from the argument or stdin', async (t) => {
  const fromArg = await cliInProcess(['keys', 'hash', 'psk_some_key'])
  t.same(fromArg, { code: 0, stdout: `${keyDigest('psk_some_key')}\n`, stderr: '' })
  const fromStdin = await cli(['keys', 'hash'], { input: 'psk_some_key\n' })
  t.equal(fromStdin.stdout, `${keyDigest('psk_some_key')}\n`)
})

t.test('config check passes a good directory and fails a bad one with the loader messages', async (t) => {
  const good = await cliInProcess(['config', 'check', FIXTURE_CONFIG_DIR])
  t.equal(good.code, 0)
  t.match(good.stdout, `${FIXTURE_CONFIG_DIR}: ok (version ${loadConfigDir(FIXTURE_CONFIG_DIR).version}, 4 plans, 4 keys, 2 routes)`)

  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  writeFileSync(join(dir, 'keys.yaml'), `keys:\n  - { id: a, sha256: ${'a'.repeat(64)}, plan: gold }\n  - { id: a, sha256: ${'b'.repeat(64)}, plan: pro }\n`)
  const bad = await cliInProcess(['config', 'check', dir])
  t.equal(bad.code, 1)
  t.equal(bad.stderr, 'keys.yaml: keys[0].plan: unknown plan "gold"\nkeys.yaml: keys[1].id: duplicate id "a"\n', 'every problem at once')
})

t.test('bans without Redis or a reachable gateway explain themselves', async (t) => {
  const closed = `http://127.0.0.1:${await freePort()}`
  const bans = await cliInProcess(['bans', 'list', '--admin', closed], { REDIS_URL: '', REDIS_CLUSTER_NODES: '' })
  t.same(bans, { code: 1, stdout: '', stderr: `petstore-gateway: cannot reach the gateway's admin API at ${closed} (ECONNREFUSED): is the gateway running? Point --admin at its admin port.\n` })

  const notUrl = await cliInProcess(['bans', 'list', '--admin', '127.0.0.1:9091'], { REDIS_URL: '', REDIS_CLUSTER_NODES: '' })
  t.same(notUrl, { code: 1, stdout: '', stderr: 'petstore-gateway: --admin must be a URL like http://127.0.0.1:9091, got "127.0.0.1:9091"\n' }, 'an --admin without a scheme is named')

  // Something else on the port (the public listener, a web page): a 200 that is not JSON.
  const page = createServer((_req, res) => { res.setHeader('content-type', 'text/html'); res.end('<html>hello</html>') })
  page.listen(0, '127.0.0.1')
  await once(page, 'listening')
  t.teardown(() => { page.close() })
  const address = page.address()
  const pageUrl = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`
  const notJson = await cliInProcess(['bans', 'list', '--admin', pageUrl], { REDIS_URL: '', REDIS_CLUSTER_NODES: '' })
  t.same(notJson, { code: 1, stdout: '', stderr: `petstore-gateway: ${pageUrl} did not answer JSON: is --admin the gateway's admin port?\n` }, 'a port that is not the admin API is named')
})

t.test('writeFileAtomic (keys rotate\'s write): the new text replaces the old, its mode kept; a rename that fails leaves no temp file', async (t) => {
  const dir = t.testdir()
  const path = join(dir, 'keys.yaml')
  writeFileSync(path, 'old\n')
  chmodSync(path, 0o600)
  writeFileAtomic(path, 'new\n')
  t.equal(readFileSync(path, 'utf8'), 'new\n')
  t.equal(statSync(path).mode & 0o777, 0o600, 'the original\'s mode kept (a keys file others cannot read stays so)')
  t.same(readdirSync(dir), ['keys.yaml'], 'no temp file left')

  // The path is a directory (not empty): the rename over it fails; the error is thrown and the temp file removed.
  const taken = join(dir, 'taken')
  mkdirSync(taken)
  writeFileSync(join(taken, 'inside'), 'x')
  t.throws(() => { writeFileAtomic(taken, 'text\n') }, { code: 'EISDIR' })
  t.same(readdirSync(dir).sort(), ['keys.yaml', 'taken'], 'the temp file is removed')
})

t.test('bans list and bans lift work against the configured Redis', async (t) => {
  const redis = await startRedis(t)
  const plans = plansYaml({ free: { perMinute: 1, perDay: 100 }, ban: { threshold: 1 } })
  const gw = await startGateway(t, { config: testConfig({ 'plans.yaml': plans }), limiter: { settings: { redisUrl: redis.url } } })
  const codes: string[] = []
  for (let i = 0; i < 3; i++) {
    const res = await fetch(`${gw.url}/v1/store/orders`, { headers: bearer(DEMO_KEYS.free) })
    codes.push(res.status === 200 ? 'ok' : ((await res.json()) as { code: string }).code)
  }
  t.same(codes, ['ok', 'rate_limited', 'key_banned'])

  const env = { REDIS_URL: redis.url }
  const list = await cliInProcess(['bans', 'list'], env)
  t.equal(list.code, 0)
  t.match(list.stdout, /^demo-free\tuntil \d{4}-\d\d-\d\dT[\d:.]+Z\t\((89\d|900) s left\)\n$/)
  const lift = await cliInProcess(['bans', 'lift', 'demo-free'], env)
  t.same(lift, { code: 0, stdout: 'ban on demo-free lifted\n', stderr: '' })
  t.same(await cliInProcess(['bans', 'list'], env), { code: 0, stdout: 'no bans in force\n', stderr: '' })
  const again = await cliInProcess(['bans', 'lift', 'demo-free'], env)
  t.same(again, { code: 0, stdout: 'demo-free is not banned: no ban to lift\n', stderr: '' }, 'no ban is not a failure: exit 0 (it was 1)')
})

t.test('store expire-leaked gives a leaked day hash its limiter hash\'s expiry, on the configured Redis', async (t) => {
  const redis = await startRedis(t)
  const expiry = String(Date.now() + 3_600_000)
  await redis.cli('HSET', 'rl:{leaky}', 'n', '2', 'x', expiry)
  await redis.cli('HSET', 'rl:{leaky}:d', '7', '2')
  const env = { REDIS_URL: redis.url, REDIS_CLUSTER_NODES: '', REDIS_SENTINELS: '' }
  const dry = await cliInProcess(['store', 'expire-leaked', '--dry-run'], env)
  t.same(dry, { code: 0, stdout: '1 day hashes scanned; 1 without an expiry would get their limiter hash\'s, 0 without a limiter hash would get a day (dry run: nothing changed)\n', stderr: '' })
  t.equal((await redis.cli('PTTL', 'rl:{leaky}:d')).trim(), '-1', 'the dry run changed nothing')
  const fixed = await cliInProcess(['store', 'expire-leaked'], env)
  t.same(fixed, { code: 0, stdout: '1 day hashes scanned; 1 without an expiry given their limiter hash\'s, 0 without a limiter hash given a day\n', stderr: '' })
  t.equal((await redis.cli('PEXPIRETIME', 'rl:{leaky}:d')).trim(), expiry, 'the day hash now expires with its limiter hash')
  const none = await cliInProcess(['store', 'expire-leaked'], { REDIS_URL: '', REDIS_CLUSTER_NODES: '', REDIS_SENTINELS: '' })
  t.equal(none.code, 1, 'without a Redis to repair: exit 1')
  t.match(none.stderr, /store expire-leaked needs REDIS_URL/, 'and says what it needs')
})
