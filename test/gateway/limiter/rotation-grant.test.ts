// A consumer whose key rotates (two credentials, one consumer) is one limiter id: both credentials
// spend the same count in Redis and ride the same grant, so the rotation costs no extra script calls.
// Measured against a consumer with one credential and the same traffic, on a real redis-server.
import { createHash } from 'node:crypto'
import t from 'tap'
import { startBackend } from '../../helpers/backend.js'
import { bearer, startGateway, testConfig, type StartedGateway } from '../../helpers/gateway.js'
import { startRedis } from '../../helpers/redis.js'

const OLD = 'psk_test_rotation_old_0123456789abcdefghij'
const NEW = 'psk_test_rotation_new_0123456789abcdefghij'
const SOLO = 'psk_test_rotation_solo_0123456789abcdefghi'
const digest = (key: string): string => createHash('sha256').update(key).digest('hex')
const KEYS = `keys:
  - { id: acme-old, consumer: acme, plan: pro, sha256: ${digest(OLD)} }
  - { id: acme-new, consumer: acme, plan: pro, sha256: ${digest(NEW)} }
  - { id: solo, plan: pro, sha256: ${digest(SOLO)} }
`
/** Requests per consumer, 40 ms apart: 25 a second, fast enough for block grants. */
const N = 75
const GAP_MS = 40

async function scriptCalls (cli: (...args: string[]) => Promise<string>): Promise<number> {
  let calls = 0
  for (const line of (await cli('INFO', 'commandstats')).split('\n')) {
    const match = /^cmdstat_(evalsha|eval):calls=(\d+)/.exec(line.trim())
    if (match !== null) calls += Number(match[2])
  }
  return calls
}

/** N requests in turn over `keys`, one at a time; the remaining counts the gateway reported. */
async function steady (gw: StartedGateway, keys: readonly string[]): Promise<number[]> {
  const remaining: number[] = []
  for (let i = 0; i < N; i++) {
    const res = await fetch(`${gw.url}/v1/pets`, { headers: bearer(keys[i % keys.length]!) })
    await res.arrayBuffer()
    if (res.status !== 200) throw new Error(`request ${i}: ${res.status}`)
    remaining.push(Number(res.headers.get('x-ratelimit-remaining')))
    await new Promise((resolve) => setTimeout(resolve, GAP_MS))
  }
  return remaining
}

t.test('two credentials of one consumer share one count and one grant', async (t) => {
  const redis = await startRedis(t)
  const backend = await startBackend(t)
  const gw = await startGateway(t, { backendUrl: backend.url, config: testConfig({ 'keys.yaml': KEYS }), limiter: { settings: { redisUrl: redis.url } }, history: { flushMs: 3_600_000 } })

  await redis.cli('CONFIG', 'RESETSTAT')
  const rotated = await steady(gw, [OLD, NEW])
  const rotatedCalls = await scriptCalls(redis.cli)
  await redis.cli('CONFIG', 'RESETSTAT')
  const solo = await steady(gw, [SOLO])
  const soloCalls = await scriptCalls(redis.cli)
  t.comment(`${N} requests at ${1000 / GAP_MS}/s: ${rotatedCalls} script calls over two credentials, ${soloCalls} over one`)

  t.same(rotated, solo, 'the same remaining counts, request by request: the two credentials spend one count')
  t.equal(rotated.at(-1), 300 - N, `after ${N} requests over both credentials, ${300 - N} left of the consumer's 300`)
  t.equal(Number(await redis.cli('HLEN', 'rl:{acme-old}')) + Number(await redis.cli('HLEN', 'rl:{acme-new}')), 0, 'nothing counted under a credential id')
  // Calls follow the rate each process estimates, which load moves: the same order, not the same count.
  t.ok(rotatedCalls <= soloCalls * 1.5 + 2, `two credentials cost about the calls one costs (${rotatedCalls} against ${soloCalls})`)
  t.ok(rotatedCalls < N / 2, `block grants: fewer than one call per two requests (${rotatedCalls} for ${N})`)
})
