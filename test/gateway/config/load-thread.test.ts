// Which thread parses a config (worker-loader.ts): the load before the process serves anything — a gateway's first,
// `config check`'s, the primary's of GATEWAY_WORKERS — reads and validates files of BIG_CONFIG_BYTES or less on the
// calling thread (nothing waits behind it, and a worker's start costs more than such a parse); a bigger config, and
// every reload, goes to the parse worker, off the event loop that serves. Workers are counted as Node announces them
// (diagnostics_channel 'worker_threads'); both threads run the same code, so their answers are the same.
import { subscribe } from 'node:diagnostics_channel'
import { writeFileSync } from 'node:fs'
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import t from 'tap'
import { ConfigError } from '../../../src/gateway/config/loader.js'
import { createConfigProvider } from '../../../src/gateway/config/provider.js'
import { configBytesOnDisk } from '../../../src/gateway/config/read-files.js'
import { BIG_CONFIG_BYTES } from '../../../src/gateway/config/worker-protocol.js'
import { fixtureConfigCopy } from '../../helpers/config-fixture.js'
import { startGateway } from '../../helpers/gateway.js'

let workersStarted = 0
subscribe('worker_threads', () => { workersStarted++ })

/** A keys.yaml past BIG_CONFIG_BYTES: `count` keys of the free plan, one line each. */
function bigKeysYaml (count: number): string {
  const lines = ['keys:']
  for (let i = 0; i < count; i++) lines.push(`  - { id: bulk-${i}, sha256: ${createHash('sha256').update(`bulk-${i}`).digest('hex')}, plan: free }`)
  return `${lines.join('\n')}\n`
}

t.test('a small config before serving: parsed here; a reload of it: in the worker, to the same snapshot', async (t) => {
  const dir = fixtureConfigCopy(t)
  t.ok(configBytesOnDisk(dir) <= BIG_CONFIG_BYTES, `the fixture is ${configBytesOnDisk(dir)} bytes, at most ${BIG_CONFIG_BYTES}`)
  const provider = createConfigProvider({ dir, now: () => 1_000 })
  t.teardown(async () => { await provider.close() })
  const before = workersStarted
  const first = await provider.loadBeforeServing()
  t.equal(workersStarted - before, 0, 'no worker started for the load before serving')
  const reloaded = await provider.load()
  t.equal(workersStarted - before, 1, 'the reload started the parse worker')
  t.equal(reloaded.version, first.version, 'both threads read the same config')
  t.same([...reloaded.keysByDigest.keys()].sort(), [...first.keysByDigest.keys()].sort(), 'the same keys')
  t.same([...reloaded.plans.keys()].sort(), [...first.plans.keys()].sort(), 'the same plans')
})

t.test('a big config before serving goes to the worker', async (t) => {
  const dir = fixtureConfigCopy(t)
  writeFileSync(join(dir, 'keys.yaml'), bigKeysYaml(12_000))
  t.ok(configBytesOnDisk(dir) > BIG_CONFIG_BYTES, `${configBytesOnDisk(dir)} bytes, over ${BIG_CONFIG_BYTES}`)
  const provider = createConfigProvider({ dir, now: () => 1_000 })
  t.teardown(async () => { await provider.close() })
  const before = workersStarted
  const snapshot = await provider.loadBeforeServing()
  t.equal(workersStarted - before, 1, 'the parse worker started')
  t.equal(snapshot.keysByDigest.size, 12_000, 'every key loaded')
})

t.test('a bad config is refused with the same problems on either thread', async (t) => {
  const dir = fixtureConfigCopy(t)
  writeFileSync(join(dir, 'keys.yaml'), 'keys:\n  - { id: short, sha256: abc, plan: free }\n  - { id: upper, sha256: ABC, plan: pro }\n')
  const provider = createConfigProvider({ dir, now: () => 1_000 })
  t.teardown(async () => { await provider.close() })
  const here = await provider.loadBeforeServing().then(() => undefined, (err: unknown) => err)
  const worker = await provider.load().then(() => undefined, (err: unknown) => err)
  t.ok(here instanceof ConfigError && worker instanceof ConfigError, 'a ConfigError from both')
  const problems = (err: unknown): readonly string[] => err instanceof ConfigError ? err.problems : []
  t.ok(problems(here).length >= 2, `every problem named: ${problems(here).join(' | ')}`)
  t.same(problems(here), problems(worker), 'the same problems')
})

t.test('a gateway on a config directory starts without a worker; its first reload starts one', async (t) => {
  const dir = fixtureConfigCopy(t)
  const before = workersStarted
  const gw = await startGateway(t, { reload: { dir, watch: false } })
  t.equal(workersStarted - before, 0, 'started, its config loaded, no worker')
  t.equal(gw.app.gatewayConfig.current.keysByDigest.size, 4, 'the fixture\'s keys are in force')
  const result = await gw.app.configReloader.reload('test')
  t.match(result, { ok: true, changed: false })
  t.equal(workersStarted - before, 1, 'the reload ran in the parse worker')
})
