// Once Redis answers again, a request is answered from Redis, not refused for an outage that is over
// (issue 38's "100 % of requests after recovery"). One gateway on a real redis-server frozen with
// SIGSTOP, STORE_TIMEOUT_MS and the barrier as shipped; the consumer has nothing to admit from in the
// outage (seen once: no reserve; the outage allowance 0 %), so while Redis is frozen its requests
// are refused. Requests that reach the gateway just before the thaw — the gateway cannot know yet
// that Redis answers: it learns it a few round trips later (a late reply, a probe, the epoch read) —
// wait for the shard to answer again, at most the recovery's budget (1 s: the larger of
// STORE_TIMEOUT_MS and half the barrier), then ask Redis like any other: 200, each counted in Redis
// (no admission without it). Before the fix they were refused at once (all 503): after a 60 s freeze
// the busiest consumers, their reserve and allowance spent, got 503s in the first milliseconds after
// the thaw. A request whose wait ends with Redis still frozen is refused (503), as before. Counts,
// not timings: the thaw comes THAW_AFTER_MS after the requests are sent, far inside the wait.
import t, { type Test } from 'tap'
import { startBackend } from '../../helpers/backend.js'
import { startGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS } from '../../helpers/config-fixture.js'
import { sleep } from '../../helpers/poll.js'
import { startRedis } from '../../helpers/redis.js'
import type { StoreOnError } from '../../../src/gateway/limiter/redis/outage.js'
import { FIELD } from '../../../src/gateway/limiter/redis/layout.js'

/** Requests sent just before the thaw. */
const AT_THAW = 6
/** The thaw comes this long after they are sent: they reach the gateway while Redis is still frozen. */
const THAW_AFTER_MS = 150

async function thaw (t: Test, policy: StoreOnError): Promise<void> {
  const redis = await startRedis(t)
  t.teardown(() => redis.signal('SIGCONT'))
  const backend = await startBackend(t)
  const gw = await startGateway(t, { backendUrl: backend.url, limiter: { settings: { redisUrl: redis.url, storeOnError: policy, storeOutageAllowancePercent: 0, storeProcesses: 1 } } })
  const get = async (): Promise<{ status: number, ms: number }> => {
    const started = performance.now()
    const res = await fetch(`${gw.url}/v1/pets?limit=1`, { headers: bearer(DEMO_KEYS.business) })
    await res.arrayBuffer()
    return { status: res.status, ms: Math.round(performance.now() - started) }
  }
  t.equal((await get()).status, 200, 'answered from Redis before the outage')
  redis.signal('SIGSTOP')
  // Its call times out (the shard goes down), it waits for the shard, then it is refused: nothing admits it.
  const frozen = await get()
  t.equal(frozen.status, 503, `refused while Redis stays frozen (after ${frozen.ms} ms: its call's budget, then the wait)`)
  const sent = Array.from({ length: AT_THAW }, async () => await get())
  await sleep(THAW_AFTER_MS)
  redis.signal('SIGCONT')
  const answers = await Promise.all(sent)
  t.comment(`sent ${THAW_AFTER_MS} ms before the thaw: ${answers.map((a) => `${a.status} in ${a.ms} ms`).join(', ')}`)
  t.same(answers.map((a) => a.status), answers.map(() => 200), `every request sent just before the thaw answered 200 from Redis (${policy})`)
  const counted = Number(await redis.cli('HGET', 'rl:{demo-business}', FIELD.minuteUnits))
  // The refused request's call ran at the thaw: its unit was counted too, and is spent by one of these or given back.
  t.ok(counted >= 1 + AT_THAW && counted <= 2 + AT_THAW, `each counted in Redis: ${counted} (the request before the outage and the ${AT_THAW}, and at most the refused one's call, its unit not given back yet)`)
  t.equal((await get()).status, 200, 'and the next one')
}

t.test('local (no allowance, no reserve): requests reaching the gateway just before the thaw are answered from Redis', async (t) => { await thaw(t, 'local') })
t.test('strict: the same, still never over (only Redis admits them)', async (t) => { await thaw(t, 'strict') })
