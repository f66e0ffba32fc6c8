// The history in a real Redis: decisions whose `now` spans UTC midnight (and a month's end) filed
// under their own days, in one small hash per consumer and month that expires; two processes'
// flushes adding up, shadow first/last kept whatever order they flush in; a Redis outage delaying a
// flush without losing it; the history surviving a gateway restart; and the memory a consumer's
// month costs, measured with MEMORY USAGE.
import t from 'tap'
import { Redis } from 'ioredis'
import { createRedisHistory, shadowKey, usageKey, USAGE_KEY_KEEP_DAYS } from '../../../src/gateway/history/redis-history.js'
import { dayOf, DAY_MS, hourOf, parseIsoDay } from '../../../src/gateway/history/days.js'
import { DecisionTally, type Batch } from '../../../src/gateway/history/tally.js'
import { decide } from '../../../src/gateway/limiter/decide.js'
import type { KeyRecord, Limits } from '../../../src/gateway/config/types.js'
import { startGateway } from '../../helpers/gateway.js'
import { bearer, DEMO_KEYS, testConfig } from '../../helpers/config-fixture.js'
import { scriptCalls, startRedis } from '../../helpers/redis.js'

const SHADOWED: Limits = { perMinute: 60, perDay: 1000, shadow: { perMinute: 2, perDay: undefined, announce: false } }
const consumer = (id: string): KeyRecord => ({ ...testConfig().keysById.get('demo-free')!, consumerId: id, id, limits: SHADOWED })

/** Tells `tally` one decision at `now` with `count` requests in the minute (this one included when admitted). */
function note (tally: DecisionTally, who: KeyRecord, now: number, count: number, allowed = true): void {
  const result = {
    outcome: allowed ? 'ok' as const : 'rate_limited' as const,
    now,
    minute: { count, resetAt: now + 60_000, retryAt: 0 },
    day: { count, resetAt: now + DAY_MS, retryAt: 0 },
    bannedUntil: 0
  }
  tally.note(who, decide(result, who.limits, who.plan))
}

const day = (iso: string): number => parseIsoDay(iso)!

t.test('decisions either side of midnight (and of a month\'s end) land in their own UTC days, in per-month hashes that expire', async (t) => {
  const redis = await startRedis(t)
  const history = createRedisHistory(new Redis(redis.url))
  t.teardown(() => history.close())
  const tally = new DecisionTally()
  const acme = consumer('acme')
  const midnight = Date.UTC(2030, 1, 1)
  note(tally, acme, midnight - 100, 1)
  note(tally, acme, midnight - 50, 2)
  note(tally, acme, midnight - 10, 60, false)
  note(tally, acme, midnight, 1)
  note(tally, acme, midnight + 100, 2)
  note(tally, acme, midnight + 200, 3)
  t.same(await history.write(tally.drain()), { usage: [], shadow: [], months: [] }, 'all written')

  t.same(await history.usage('acme', day('2030-01-31'), day('2030-02-01')), [
    { day: day('2030-01-31'), admitted: 2, units: 2, rejected: 1, overage: 0 },
    { day: day('2030-02-01'), admitted: 3, units: 3, rejected: 0, overage: 0 }
  ])
  t.same(await redis.cli('HGETALL', usageKey('acme', '203001')), '31a\n2\n31r\n1', 'January\'s hash: fields DDa / DDr')
  t.same(await redis.cli('HGETALL', usageKey('acme', '203002')), '01a\n3')
  t.equal(usageKey('acme', '203002'), 'rl:{acme}:u:203002', 'under the consumer\'s hash tag')
  const expireAt = Number(await redis.cli('EXPIRETIME', usageKey('acme', '203001')))
  t.equal(expireAt, (day('2030-02-01') + USAGE_KEY_KEEP_DAYS) * 86_400, 'January\'s hash expires 40 days after the month ends')

  const shadow = await history.shadow('free', hourOf(midnight) - 24, hourOf(midnight), 20)
  t.same(shadow, { consumers: 1, rejections: 2, complete: true, untracked: 0, top: [{ consumerId: 'acme', rejections: 2, admitted: 1, first: midnight - 10, last: midnight + 200 }] },
    'shadow 2: the rejected request with 60 before it and the third request after midnight; the first and the last of them')
})

t.test('two processes\' flushes add up; first and last stay the earliest and latest whatever order they arrive in', async (t) => {
  const redis = await startRedis(t)
  const [a, b] = [createRedisHistory(new Redis(redis.url)), createRedisHistory(new Redis(redis.url))]
  t.teardown(async () => { await a.close(); await b.close() })
  const now = Date.UTC(2030, 5, 15, 12)
  const [ta, tb] = [new DecisionTally(), new DecisionTally()]
  const bob = consumer('bob')
  note(ta, bob, now + 5_000, 3)
  note(ta, bob, now + 6_000, 4)
  note(tb, bob, now + 1_000, 5)
  note(tb, bob, now + 9_000, 6, false)
  await b.write(tb.drain())
  await a.write(ta.drain())
  t.same(await a.usage('bob', dayOf(now), dayOf(now)), [{ day: dayOf(now), admitted: 3, units: 3, rejected: 1, overage: 0 }])
  t.same((await b.shadow('free', hourOf(now) - 24, hourOf(now), 20)).top, [{ consumerId: 'bob', rejections: 4, admitted: 3, first: now + 1_000, last: now + 9_000 }])
  t.ok(Number(await redis.cli('TTL', shadowKey('free', hourOf(now), 'n'))) > 0, 'shadow sets expire')
})

t.test('a flush while Redis is down answers what it could not write; the next one writes it', async (t) => {
  const redis = await startRedis(t)
  const history = createRedisHistory(new Redis(redis.url, { enableOfflineQueue: false, maxRetriesPerRequest: 1, retryStrategy: () => 50 }))
  t.teardown(() => history.close())
  const tally = new DecisionTally()
  const now = Date.UTC(2030, 5, 15, 12)
  note(tally, consumer('carol'), now, 1)
  note(tally, consumer('carol'), now, 3)
  await redis.stop()
  const unsent: Batch = await history.write(tally.drain())
  t.same(unsent.usage.map((c) => c.admitted), [2], 'the counts come back')
  t.equal(unsent.shadow.length, 1)
  await redis.start()
  let left = unsent
  for (let i = 0; i < 100 && (left.usage.length > 0 || left.shadow.length > 0); i++) {
    left = await history.write(left)
    if (left.usage.length > 0) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  t.same(await history.usage('carol', dayOf(now), dayOf(now)), [{ day: dayOf(now), admitted: 2, units: 2, rejected: 0, overage: 0 }])

  // Redis comes back empty (no persistence): the key made again must get its expiry again.
  await redis.stop()
  await redis.start()
  note(tally, consumer('carol'), now, 1)
  let again = tally.drain()
  for (let i = 0; i < 100 && again.usage.length > 0; i++) {
    again = await history.write(again)
    if (again.usage.length > 0) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  t.same(await history.usage('carol', dayOf(now), dayOf(now)), [{ day: dayOf(now), admitted: 1, units: 1, rejected: 0, overage: 0 }])
  t.ok(Number(await redis.cli('TTL', usageKey('carol', '203006'))) > 0, 'the usage hash made again expires')
})

t.test('a consumer\'s month of history costs a few hundred bytes (MEMORY USAGE), and survives a gateway restart', async (t) => {
  const redis = await startRedis(t)
  const history = createRedisHistory(new Redis(redis.url))
  const tally = new DecisionTally()
  for (let d = 0; d < 31; d++) {
    // A busy month: thousands admitted and some rejected every day.
    for (let i = 0; i < 3; i++) note(tally, consumer('dave'), Date.UTC(2030, 0, 1 + d, 8 + i), 1)
    note(tally, consumer('dave'), Date.UTC(2030, 0, 1 + d, 20), 70, false)
  }
  await history.write(tally.drain())
  await redis.cli('HINCRBY', usageKey('dave', '203001'), '15a', '987654')
  await history.close()
  const bytes = Number(await redis.cli('MEMORY', 'USAGE', usageKey('dave', '203001'), 'SAMPLES', '0'))
  t.comment(`MEMORY USAGE of a full month's hash (62 fields): ${bytes} bytes`)
  t.ok(bytes > 0 && bytes < 1024, `a month under 1 KiB (${bytes} bytes)`)

  const settings = { redisUrl: redis.url }
  const first = await startGateway(t, { limiter: { settings } })
  for (let i = 0; i < 3; i++) await (await fetch(`${first.url}/v1/pets?limit=1`, { headers: bearer(DEMO_KEYS.free) })).arrayBuffer()
  await first.close() // the last counts are flushed on close
  const second = await startGateway(t, { limiter: { settings }, backendUrl: first.backend?.url })
  const usage = await (await fetch(`${second.adminUrl}/admin/consumers/demo-free/usage`)).json() as { scope: string, total: { admitted: number } }
  t.equal(usage.scope, 'shared')
  t.equal(usage.total.admitted, 3, 'the new process reads what the old one counted')
})

t.test('the usage history is off the hot path: 200 requests cost no history command, and one flush one HINCRBY for them all', async (t) => {
  const redis = await startRedis(t)
  const gw = await startGateway(t, { limiter: { settings: { redisUrl: redis.url } }, history: { flushMs: 3_600_000 } })
  await (await fetch(`${gw.url}/v1/pets?limit=1`, { headers: bearer(DEMO_KEYS.pro) })).arrayBuffer()
  await gw.app.history.flush() // the month's expiry is set: what follows is the steady state
  await redis.cli('CONFIG', 'RESETSTAT')
  for (let i = 0; i < 200; i++) await (await fetch(`${gw.url}/v1/pets?limit=1`, { headers: bearer(DEMO_KEYS.pro) })).arrayBuffer()
  const before = await redis.cli('INFO', 'commandstats')
  t.notMatch(before, /cmdstat_hincrby/, 'no history command while the requests ran')
  const scripts = await scriptCalls(redis.cli)
  t.ok(scripts >= 1 && scripts <= 200, `the limiter's grant calls only: ${scripts} for 200 requests`)
  await gw.app.history.flush()
  const after = await redis.cli('INFO', 'commandstats')
  t.match(after, /cmdstat_hincrby:calls=1,/, 'one HINCRBY for 200 admitted requests')
  t.notMatch(after, /cmdstat_expireat/, 'the expiry is not sent again')
})

t.test('a frozen Redis (SIGSTOP): an admin read answers 503 in about the wait, the history still closes; thawed, the counts arrive once', async (t) => {
  const redis = await startRedis(t)
  const settings = { redisUrl: redis.url }
  const gw = await startGateway(t, { limiter: { settings }, history: { flushMs: 3_600_000, waitMs: 300 } })
  for (let i = 0; i < 3; i++) await (await fetch(`${gw.url}/v1/pets?limit=1`, { headers: bearer(DEMO_KEYS.free) })).arrayBuffer()
  redis.signal('SIGSTOP')
  t.teardown(() => { redis.signal('SIGCONT') })
  const started = Date.now()
  const res = await fetch(`${gw.adminUrl}/admin/consumers/demo-free/usage`)
  t.equal(res.status, 503, 'the history did not answer')
  t.match(await res.json(), { code: 'unavailable' })
  t.ok(Date.now() - started < 3_000, `answered in ${Date.now() - started} ms`)
  redis.signal('SIGCONT')
  // The write sent while Redis was frozen was never timed out, so it is counted once, not twice.
  const reader = createRedisHistory(new Redis(redis.url))
  t.teardown(() => reader.close())
  const today = dayOf(Date.now())
  let admitted = 0
  for (let i = 0; i < 100 && admitted < 3; i++) {
    admitted = (await reader.usage('demo-free', today, today))[0]?.admitted ?? 0
    if (admitted < 3) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  t.equal(admitted, 3)

  // Closing the history (as the gateway's close does) does not wait for a frozen Redis either.
  const closable = createRedisHistory(new Redis(redis.url), { readWaitMs: 300 })
  await closable.usage('demo-free', today, today)
  redis.signal('SIGSTOP')
  const closing = Date.now()
  await closable.close()
  t.ok(Date.now() - closing < 2_000, `history closed in ${Date.now() - closing} ms with Redis frozen`)
  redis.signal('SIGCONT')
})
