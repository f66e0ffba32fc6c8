// The grant script's record of recent 429s under a flood, on a real redis-server: a key refused thousands of times
// under a ban policy it cannot reach (threshold 1,000,000 in an hour) keeps one event per bucket of the window (here a
// minute's: one per second), not one per refusing call — before, the field grew by an event per call and every
// refusal of the key reread it (1.9 ms of Redis a call at this policy, 29 Nov). Redis's cost per refusing call is
// printed, not asserted (it moves with the machine's load); what is asserted is the field's size.
import t from 'tap'
import { Redis } from 'ioredis'
import { BAN_RECORD_BUCKETS, banBucketMs } from '../../../../src/gateway/limiter/ban-record.js'
import { FIELD } from '../../../../src/gateway/limiter/redis/layout.js'
import type { GrantEntry } from '../../../../src/gateway/limiter/redis/scripts.js'
import { grantOnce } from '../../../helpers/grant-call.js'
import { startRedis } from '../../../helpers/redis.js'

const CALLS = 3_000
const WINDOW_SECONDS = 3_600
const BUCKET_MS = banBucketMs(WINDOW_SECONDS * 1000)

t.test('a flood far below a high threshold: the field stays one event per bucket', async (t) => {
  const redis = await startRedis(t)
  const client = new Redis(redis.url)
  t.teardown(() => { client.disconnect() })
  const entry = (requests: number): GrantEntry => ({
    key: 'rl:{flooded}', minuteLimit: 1, dayLimit: 10_000_000, monthLimit: 0, monthSoft: false, requests, cost: 1, extra: 0, reserve: 0, write: true,
    blocksBucket: -1, blocks: 0, ban: { threshold: 1_000_000, windowSeconds: WINDOW_SECONDS, durationSeconds: 900, maxDurationSeconds: 86_400 }, adjustments: []
  })
  t.equal((await grantOnce(client, 'p0', entry(1))).reply.admitted, 1, 'the minute\'s one unit')
  await redis.cli('CONFIG', 'RESETSTAT')
  const first = await grantOnce(client, 'p0', entry(1))
  let last = first
  let refused = 1 - first.reply.admitted
  for (let call = 1; call < CALLS; call++) {
    last = await grantOnce(client, 'p0', entry(1))
    refused += 1 - last.reply.admitted
  }
  const minutes = Math.floor((last.now - first.now) / 60_000)
  t.ok(refused >= CALLS - minutes, `the calls refused (${refused} of ${CALLS}: a unit more admitted only for each minute the flood outlasted)`)
  const record = (await client.hget('rl:{flooded}', FIELD.recentRejections)) ?? ''
  const events = record.split(',')
  const held = events.reduce((sum, event) => sum + Number(event.split(':')[1]), 0)
  const seconds = (last.now - first.now) / 1000
  const info = await redis.cli('INFO', 'commandstats')
  const perCall = /cmdstat_eval:calls=\d+,usec=\d+,usec_per_call=([\d.]+)/.exec(info)?.[1]
  t.comment(`${CALLS} refusing calls over ${seconds.toFixed(1)} s: ${events.length} events holding ${held} 429s; Redis ${perCall} µs a call`)
  t.equal(held, refused, 'every refusal counted')
  const touched = Math.floor(last.now / BUCKET_MS) - Math.floor(first.now / BUCKET_MS) + 1
  t.ok(events.length === touched && touched <= BAN_RECORD_BUCKETS, `one event per ${BUCKET_MS / 1000} s bucket the calls touched (${events.length}, ${touched} touched)`)
})
