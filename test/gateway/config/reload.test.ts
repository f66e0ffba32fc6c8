import t from 'tap'
import { cpSync, mkdirSync, readFileSync, renameSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { keyDigest } from '../../../src/gateway/auth/bearer.js'
import { startGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS, fixtureConfigCopy, plansYaml, FIXTURE_CONFIG_DIR } from '../../helpers/config-fixture.js'
import { until } from '../../helpers/poll.js'
import { PROCESS_START_TIMEOUT_MS } from '../../helpers/ports.js'

const NEW_KEY = 'psk_reload_test_key_0123456789abcdef'
const DEFAULT_KEYS = readFileSync(join(FIXTURE_CONFIG_DIR, 'keys.yaml'), 'utf8')

/**
 * A watched change is applied, by a config worker thread started for the load (its modules loaded):
 * the wait has a process start's deadline and only tells a hang from a late reload (how fast it comes
 * is the machine's load, not the code's; each test prints what it measured).
 */
const RELOAD_WITHIN_MS = PROCESS_START_TIMEOUT_MS

async function status (url: string, key: string): Promise<number> {
  const res = await fetch(`${url}/v1/store/orders`, { headers: bearer(key) })
  await res.arrayBuffer()
  return res.status
}

t.test('a key added to keys.yaml works once the watcher reloads; disabling it takes effect the same way', async (t) => {
  const dir = fixtureConfigCopy(t)
  const gw = await startGateway(t, { reload: { dir, quietMs: 50 } })
  await gw.app.configReloader.ready() // timed from a running gateway, not one still starting
  t.equal(await status(gw.url, NEW_KEY), 401)

  const added = Date.now()
  writeFileSync(join(dir, 'keys.yaml'), `${DEFAULT_KEYS}  - { id: new-partner, sha256: ${keyDigest(NEW_KEY)}, plan: pro }\n`)
  await until('the new key admitted', async () => await status(gw.url, NEW_KEY) === 200, RELOAD_WITHIN_MS)
  t.comment(`the added key admitted ${Date.now() - added} ms after the write (quiet period 50 ms)`)

  const disabled = Date.now()
  writeFileSync(join(dir, 'keys.yaml'), `${DEFAULT_KEYS}  - { id: new-partner, sha256: ${keyDigest(NEW_KEY)}, plan: pro, disabled: true }\n`)
  await until('the removed key refused', async () => await status(gw.url, NEW_KEY) === 401, RELOAD_WITHIN_MS)
  t.comment(`the disabled key refused ${Date.now() - disabled} ms after the write`)
  t.equal(await status(gw.url, DEMO_KEYS.free), 200, 'other keys unaffected')

  const reloads = gw.logs.filter((l) => l.msg === 'config reloaded')
  t.ok(reloads.length >= 2, 'each reload is logged')
  t.match(reloads.at(-1), { trigger: 'watch', changed: true, keys: 5 })
})

t.test('a bad file is rejected whole: the last good config stays, the failure is logged and counted', async (t) => {
  const dir = fixtureConfigCopy(t)
  const gw = await startGateway(t, { reload: { dir, watch: false } })
  const before = gw.app.gatewayConfig.current.version
  // The new key is valid, but the plan of another entry is not: neither may take effect.
  writeFileSync(join(dir, 'keys.yaml'), `${DEFAULT_KEYS}  - { id: new-partner, sha256: ${keyDigest(NEW_KEY)}, plan: pro }\n  - { id: broken, sha256: ${'e'.repeat(64)}, plan: gold }\n`)
  const result = await gw.app.configReloader.reload('test')
  t.same(result, { ok: false, problems: ['keys.yaml: keys[5].plan: unknown plan "gold"'] })
  t.equal(gw.app.gatewayConfig.current.version, before)
  t.equal(await status(gw.url, NEW_KEY), 401, 'the valid part of the bad file did not take effect')
  t.equal(await status(gw.url, DEMO_KEYS.pro), 200)
  t.match(gw.logs.find((l) => l.msg === 'config reload rejected; the last good config stays in force'), {
    level: 50, trigger: 'test', keptVersion: before, problems: ['keys.yaml: keys[5].plan: unknown plan "gold"']
  })
  const scrape = await (await fetch(`${gw.adminUrl}/metrics`)).text()
  t.match(scrape, /gateway_config_reloads_total\{result="failure"\} 1/)

  writeFileSync(join(dir, 'keys.yaml'), DEFAULT_KEYS)
  t.match(await gw.app.configReloader.reload('test'), { ok: true, changed: false, version: before })
  t.match(await (await fetch(`${gw.adminUrl}/metrics`)).text(), /gateway_config_reloads_total\{result="success"\} 1/)
})

t.test('the Kubernetes ConfigMap symlink swap (..data) is picked up', async (t) => {
  const dir = t.testdir()
  const first = join(dir, '..2026_11_22_10_00_00.000000001')
  mkdirSync(first)
  cpSync(FIXTURE_CONFIG_DIR, first, { recursive: true })
  symlinkSync('..2026_11_22_10_00_00.000000001', join(dir, '..data'))
  for (const file of ['plans.yaml', 'keys.yaml', 'routes.yaml']) symlinkSync(join('..data', file), join(dir, file))

  const gw = await startGateway(t, { reload: { dir, quietMs: 50 } })
  await gw.app.configReloader.ready() // the 2 s are from a running gateway, not one still starting
  t.equal(await status(gw.url, NEW_KEY), 401)

  // What the kubelet does: write the new version beside the old, then atomically re-point ..data.
  const second = join(dir, '..2026_11_22_10_05_00.000000002')
  mkdirSync(second)
  cpSync(FIXTURE_CONFIG_DIR, second, { recursive: true })
  writeFileSync(join(second, 'keys.yaml'), `${DEFAULT_KEYS}  - { id: new-partner, sha256: ${keyDigest(NEW_KEY)}, plan: pro }\n`)
  symlinkSync('..2026_11_22_10_05_00.000000002', join(dir, '..data_tmp'))
  renameSync(join(dir, '..data_tmp'), join(dir, '..data'))

  await until('the new key admitted', async () => await status(gw.url, NEW_KEY) === 200, RELOAD_WITHIN_MS)
})

t.test('moving a key to a smaller plan keeps the requests it already spent in the window', async (t) => {
  const dir = fixtureConfigCopy(t)
  const plans = 'plans:\n  big: { perMinute: 10, perDay: 1000 }\n  small: { perMinute: 5, perDay: 1000 }\nanonymous: { perMinute: 30, perDay: 300 }\n'
  writeFileSync(join(dir, 'plans.yaml'), plans)
  writeFileSync(join(dir, 'keys.yaml'), `keys:\n  - { id: mover, sha256: ${keyDigest(NEW_KEY)}, plan: big }\n`)
  const gw = await startGateway(t, { reload: { dir, watch: false } })
  for (let i = 0; i < 6; i++) t.equal(await status(gw.url, NEW_KEY), 200)

  writeFileSync(join(dir, 'keys.yaml'), `keys:\n  - { id: mover, sha256: ${keyDigest(NEW_KEY)}, plan: small }\n`)
  t.match(await gw.app.configReloader.reload('test'), { ok: true, changed: true })
  const res = await fetch(`${gw.url}/v1/store/orders`, { headers: bearer(NEW_KEY) })
  t.equal(res.status, 429, '6 already spent against a limit of 5: limited at once')
  t.equal(res.headers.get('x-ratelimit-limit'), '5')
  t.equal(res.headers.get('x-ratelimit-remaining'), '0')
  t.match(await res.json(), { code: 'rate_limited', status: 429 })
})

t.test('requests in flight during reloads are all answered, each under one config', async (t) => {
  const dir = fixtureConfigCopy(t)
  // Two configs that differ in two files: in A the new key is unknown and the anonymous policy allows
  // 1000/min; in B the key is on pro (300/min) and the anonymous policy allows 999/min. A request
  // read under one config answers (401, limit 1000) or (200, limit 300); any other pair (a 401 limited
  // at 999, say) mixed the two.
  const variants = [
    { plans: plansYaml({ anonymous: { perMinute: 1000, perDay: 100000 } }), keys: DEFAULT_KEYS },
    { plans: plansYaml({ anonymous: { perMinute: 999, perDay: 100000 } }), keys: `${DEFAULT_KEYS}  - { id: new-partner, sha256: ${keyDigest(NEW_KEY)}, plan: pro }\n` }
  ]
  writeFileSync(join(dir, 'plans.yaml'), variants[0]!.plans)
  const gw = await startGateway(t, { reload: { dir, watch: false } })
  const answers: Array<Promise<string>> = []
  for (let i = 0; i < 40; i++) {
    answers.push(fetch(`${gw.url}/v1/store/orders`, { headers: bearer(NEW_KEY) }).then(async (res) => {
      await res.arrayBuffer()
      return `${res.status} ${res.headers.get('x-ratelimit-limit') ?? ''}`
    }))
    const next = variants[(i + 1) % 2]!
    writeFileSync(join(dir, 'plans.yaml'), next.plans)
    writeFileSync(join(dir, 'keys.yaml'), next.keys)
    t.match(await gw.app.configReloader.reload('test'), { ok: true, changed: true })
  }
  const seen = await Promise.all(answers)
  t.same(seen.filter((s) => s !== '401 1000' && s !== '200 300'), [], 'every request answered under exactly one config')
  t.ok(seen.includes('401 1000') && seen.includes('200 300'), 'requests ran under both configs')
})
