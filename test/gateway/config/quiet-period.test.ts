// Regression (issue 26, finding 9): a keys.yaml caught mid-write is not applied. A writer that pauses
// 1.5 s in the middle of the file used to get its valid prefix loaded (5 of 13 keys) until it went
// on, so a key in the missing part answered 401. A watched change is now applied only once the
// directory has been quiet for CONFIG_QUIET_MS (default 2 s). The same write against a gateway with
// the old 150 ms wait shows the attack still happens there, so this test would see it.
import { closeSync, cpSync, fsyncSync, openSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { keyDigest } from '../../../src/gateway/auth/bearer.js'
import { DEFAULT_CONFIG_QUIET_MS } from '../../../src/gateway/config/watch.js'
import { startGateway, type StartedGateway } from '../../helpers/gateway.js'
import { bearer, FIXTURE_CONFIG_DIR } from '../../helpers/config-fixture.js'
import { sleep, until } from '../../helpers/poll.js'
import { PROCESS_START_TIMEOUT_MS } from '../../helpers/ports.js'

const KEYS = Array.from({ length: 13 }, (_, i) => `psk_quiet_period_key_${String(i).padStart(2, '0')}_0123456789`)
const PAUSE_MS = 1_500
const PROBE_EVERY_MS = 50
/** The old watch debounce: the attack's setting. */
const OLD_WAIT_MS = 150

function keysYaml (plan: string): string {
  return 'keys:\n' + KEYS.map((key, i) => `  - { id: k${i}, sha256: ${keyDigest(key)}, plan: ${plan} }\n`).join('')
}

async function status (gw: StartedGateway, key: string): Promise<number> {
  const res = await fetch(`${gw.url}/v1/store/orders`, { headers: bearer(key) })
  await res.arrayBuffer()
  return res.status
}

t.test('a writer pausing 1.5 s mid-file: the prefix is never applied; the whole file is, once quiet', async (t) => {
  t.equal(DEFAULT_CONFIG_QUIET_MS > PAUSE_MS, true, 'the default quiet period outlasts the pause')
  const dir = t.testdir()
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  const path = join(dir, 'keys.yaml')
  const fd0 = openSync(path, 'w')
  // business (1,000 a minute): the probes below never reach a limit, whatever their pace.
  writeSync(fd0, keysYaml('business'))
  closeSync(fd0)
  const gw = await startGateway(t, { reload: { dir } })
  const old = await startGateway(t, { reload: { dir, quietMs: OLD_WAIT_MS } })
  await Promise.all([gw.app.configReloader.ready(), old.app.configReloader.ready()])
  const before = gw.app.gatewayConfig.current.version
  const late = KEYS[9] ?? ''
  t.equal(await status(gw, late), 200)

  // Rewrite in place (no temporary file and rename), pausing after the fifth key: what a hand edit or
  // a config-management tool writing in chunks does. The new file moves every key to pro.
  const text = keysYaml('pro')
  const cut = text.split('\n').slice(0, 6).join('\n').length + 1
  const seen: number[] = []
  let writing = true
  const probe = (async () => {
    while (writing) {
      seen.push(await status(gw, late))
      await sleep(PROBE_EVERY_MS)
    }
  })()
  const fd = openSync(path, 'w')
  writeSync(fd, text.slice(0, cut))
  fsyncSync(fd)
  await sleep(PAUSE_MS)
  writeSync(fd, text.slice(cut))
  closeSync(fd)
  // Applied by a config worker thread started for the load: a process start's deadline, a hang detector only.
  await until('the whole new file applied', () => gw.app.gatewayConfig.current.version !== before, DEFAULT_CONFIG_QUIET_MS + PROCESS_START_TIMEOUT_MS)
  writing = false
  await probe

  t.same(seen.filter((s) => s !== 200), [], `a key in the part written late answered 200 all along (${seen.length} probes)`)
  t.same(gw.logs.filter((l) => l.msg === 'config reloaded').map((l) => l.keys), [13], 'one reload, of the whole file')
  t.equal(gw.app.gatewayConfig.current.keysById.get('k12')?.plan, 'pro')
  const applied = old.logs.filter((l) => l.msg === 'config reloaded').map((l) => l.keys)
  t.equal(applied[0], 5, 'with the old 150 ms wait the five-key prefix was applied: the attack, reproduced')
})
