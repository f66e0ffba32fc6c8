// A consumer whose key rotates (two credentials, one consumer) is one limiter id: both credentials
// spend the same count in Redis and ride the same grant, so the rotation costs no extra script calls.
// Measured against a consumer with one credential and the same traffic, interleaved with it request by
// request (the same seconds, the same machine load), on a real redis-server: the script calls that
// name each consumer are read from MONITOR.
import { createHash } from 'node:crypto'
import t from 'tap'
import { startBackend } from '../../helpers/backend.js'
import { startGateway } from '../../helpers/gateway.js'
import { bearer, testConfig } from '../../helpers/config-fixture.js'
import { until } from '../../helpers/poll.js'
import { monitorCommands, startRedis } from '../../helpers/redis.js'

const OLD = 'psk_test_rotation_old_0123456789abcdefghij'
const NEW = 'psk_test_rotation_new_0123456789abcdefghij'
const SOLO = 'psk_test_rotation_solo_0123456789abcdefghi'
const digest = (key: string): string => createHash('sha256').update(key).digest('hex')
const KEYS = `keys:
  - { id: acme-old, consumer: acme, plan: pro, sha256: ${digest(OLD)} }
  - { id: acme-new, consumer: acme, plan: pro, sha256: ${digest(NEW)} }
  - { id: solo, plan: pro, sha256: ${digest(SOLO)} }
`
/** Requests per consumer; one request every 20 ms in turn over OLD, SOLO, NEW, SOLO: 25 a second each. */
const N = 75
const GAP_MS = 20
const ORDER = [OLD, SOLO, NEW, SOLO]

t.test('two credentials of one consumer share one count and one grant', async (t) => {
  const redis = await startRedis(t)
  const backend = await startBackend(t)
  const gw = await startGateway(t, { backendUrl: backend.url, config: testConfig({ 'keys.yaml': KEYS }), limiter: { settings: { redisUrl: redis.url } }, history: { flushMs: 3_600_000 } })

  const scripts: string[][] = []
  await monitorCommands(t, redis.port, (args) => { if (/^(evalsha|eval)$/i.test(args[0] ?? '')) scripts.push(args) })

  const remaining = { acme: [] as number[], solo: [] as number[] }
  for (let i = 0; i < 2 * N; i++) {
    const key = ORDER[i % ORDER.length]!
    const res = await fetch(`${gw.url}/v1/pets`, { headers: bearer(key) })
    await res.arrayBuffer()
    if (res.status !== 200) throw new Error(`request ${i}: ${res.status}`)
    remaining[key === SOLO ? 'solo' : 'acme'].push(Number(res.headers.get('x-ratelimit-remaining')))
    await new Promise((resolve) => setTimeout(resolve, GAP_MS))
  }
  await redis.cli('EVAL', 'return 1', '1', 'rl:{seen-all}') // once MONITOR passes this on, it has passed on every call before
  await until('MONITOR to catch up', () => scripts.some((args) => args.includes('rl:{seen-all}')))
  const calls = (name: string): number => scripts.filter((args) => args.includes(`rl:{${name}}`)).length
  const rotatedCalls = calls('acme')
  const soloCalls = calls('solo')
  t.comment(`${N} requests each at 25/s, interleaved: ${rotatedCalls} script calls name the consumer with two credentials, ${soloCalls} the one with one`)

  t.same(remaining.acme, remaining.solo, 'the same remaining counts, request by request: the two credentials spend one count')
  t.equal(remaining.acme.at(-1), 300 - N, `after ${N} requests over both credentials, ${300 - N} left of the consumer's 300`)
  t.equal(Number(await redis.cli('HLEN', 'rl:{acme-old}')) + Number(await redis.cli('HLEN', 'rl:{acme-new}')), 0, 'nothing counted under a credential id')
  t.notOk(scripts.some((args) => args.some((arg) => /^rl:\{acme-(old|new)\}/.test(arg))), 'no script call names a credential')
  // Two grants (one per credential) would cost about twice the calls; one grant costs what one credential costs.
  t.ok(rotatedCalls <= soloCalls * 1.5 + 3, `two credentials cost the calls one costs (${rotatedCalls} against ${soloCalls})`)
  t.ok(rotatedCalls < N / 2, `block grants: fewer than one call per two requests (${rotatedCalls} for ${N})`)
})
