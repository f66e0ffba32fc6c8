// A busy consumer's reserve (STORE_ON_ERROR=local) outlives the give-back its process sends at the end
// of a second. That call goes out when nothing waits, just past the second's boundary, where the rate
// of the second just begun is still 0: it asked Redis for no reserve, and Redis — which never keeps a
// process's reserve above what it asks — dropped it, so an outage that began then found none and
// answered 503 to a consumer it should have served (seen as a flake of the tracing fallback test).
// A give-back also asked for a block (as if someone waited) at the boundary, which came back in the
// second just ended and was given back in turn: three calls where one does.
// On a real redis-server: the reserve Redis keeps for the process before and after the give-back.
import t from 'tap'
import { startBackend } from '../../helpers/backend.js'
import { startGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS } from '../../helpers/config-fixture.js'
import { sleep } from '../../helpers/poll.js'
import { reserveUnits, scriptCalls, startRedis } from '../../helpers/redis.js'
import { FIELD } from '../../../src/gateway/limiter/redis/layout.js'

t.test('a give-back at the end of a second keeps the reserve of a consumer busy in it', async (t) => {
  const redis = await startRedis(t)
  const backend = await startBackend(t)
  const gw = await startGateway(t, { backendUrl: backend.url, limiter: { settings: { redisUrl: redis.url, storeOnError: 'local' } } })
  // About 18 a second for at least 2 s (busy in two seconds running: a reserve), then up to mid-second:
  // the block fetched at that second's start has units left to give back at its end. A second whose
  // block ran out gives nothing back (no call): then another second is tried.
  const started = Date.now()
  let before = 0
  let after = 0
  let giveBacks = 0
  for (let attempt = 1; attempt <= 4 && giveBacks === 0; attempt++) {
    while (Date.now() - started < 2_200 * attempt || Date.now() % 1000 < 450 || Date.now() % 1000 > 650) {
      const res = await fetch(`${gw.url}/v1/pets?limit=1`, { headers: bearer(DEMO_KEYS.business) })
      await res.arrayBuffer()
      t.equal(res.status, 200)
      await sleep(50)
    }
    before = reserveUnits(await redis.cli('HGET', 'rl:{demo-business}', FIELD.reserves))
    const callsBefore = await scriptCalls(redis.cli)
    await sleep(1000 - (Date.now() % 1000) + 300)
    giveBacks = await scriptCalls(redis.cli) - callsBefore
    after = reserveUnits(await redis.cli('HGET', 'rl:{demo-business}', FIELD.reserves))
    t.comment(`attempt ${attempt}: reserve before the second's end ${before}, after it ${after}; script calls then (the give-back): ${giveBacks}`)
  }
  t.ok(before > 0, 'the busy consumer holds a reserve')
  t.equal(giveBacks, 1, 'one call at the second\'s end with nothing waiting: the give-back alone, no block fetched for nobody')
  // The reserve follows the rate of the second that ended (half of it was busy): smaller, never none.
  t.ok(after > 0 && after <= before, 'the give-back kept a reserve')
})
