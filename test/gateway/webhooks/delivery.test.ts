// Delivery through the Redis queue against a real redis-server and a receiver verifying with the
// `standardwebhooks` package, on an injected clock (the retry schedule in milliseconds): an event is
// queued once however many processes emit it; a receiver down for 10 minutes of the clock gets
// every event once it is up, each once by id and with the same id on every attempt; after the last
// attempt a job is a dead letter, readable and replayable; a redirect is not followed, a receiver
// that does not answer is a failed attempt after the response timeout; and the same on a Redis Cluster.
import t, { type Test } from 'tap'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Redis } from 'ioredis'
import { createDeliveryWorker, DEFAULT_RETRY_SCHEDULE_MS, type DeliveryResult } from '../../../src/gateway/webhooks/deliver.js'
import { quotaExceeded, quotaThreshold } from '../../../src/gateway/webhooks/events.js'
import { createSender } from '../../../src/gateway/webhooks/http.js'
import { createRedisQueue, webhookKeys } from '../../../src/gateway/webhooks/redis-queue.js'
import type { WebhookQueue } from '../../../src/gateway/webhooks/queue.js'
import type { WebhooksConfig } from '../../../src/gateway/webhooks/config.js'
import { webhookHeaders } from '../../../src/gateway/webhooks/sign.js'
import { createRedisClient, waitReady } from '../../../src/gateway/redis/connection.js'
import { startRedis, startRedisCluster } from '../../helpers/redis.js'
import { newSecret, startReceiver, type Receiver } from '../../helpers/webhook-receiver.js'

const SECRET = newSecret()
const T0 = Date.parse('2030-03-20T10:00:00Z')
const MINUTE = 60_000

function configFor (receiver: Receiver, secrets = [SECRET]): WebhooksConfig {
  return { endpoints: [{ name: 'hooks', url: receiver.url, events: ['quota.threshold', 'quota.exceeded'], secrets }], thresholds: [0.8, 1], overageSteps: [], expiringDays: [7] }
}

async function redisQueue (t: Test, url: string): Promise<WebhookQueue> {
  const client = new Redis(url)
  const queue = createRedisQueue(client, { claimIdleMs: 60_000 })
  t.teardown(() => queue.close())
  return queue
}

const crossing = (consumerId: string, threshold: number): ReturnType<typeof quotaThreshold> =>
  quotaThreshold({ consumerId, plan: 'pro', units: Math.round(threshold * 10), limit: 10, threshold, at: T0 })

t.test('down for 10 minutes of the clock, then up: every event delivered once by id, the same id on every attempt', async (t) => {
  const redis = await startRedis(t)
  const receiver = await startReceiver(t, SECRET)
  const ids: string[] = []
  const counting = createSender()
  const sender = { send: async (...args: Parameters<typeof counting.send>) => { ids.push(args[1]['webhook-id']); return await counting.send(...args) }, close: counting.close }
  t.teardown(() => sender.close())
  let clock = T0
  const processA = await redisQueue(t, redis.url)
  const processB = await redisQueue(t, redis.url)
  const results: DeliveryResult[] = []
  const worker = createDeliveryWorker({ queue: processA, sender, config: () => configFor(receiver), now: () => clock, onResult: (_e, r) => results.push(r) })

  // Two processes saw the same crossings: each event is queued once.
  const events = [crossing('acme', 0.8), crossing('acme', 1), quotaExceeded({ consumerId: 'acme', plan: 'pro', units: 10, limit: 10, at: T0 })]
  const queuedBy = []
  for (const event of events) queuedBy.push([await processA.emit(event, ['hooks'], clock), await processB.emit(event, ['hooks'], clock)])
  t.same(queuedBy, [[true, false], [true, false], [true, false]], 'the first emitter queues, the other finds the once-key taken')
  const ttl = Number(await redis.cli('PTTL', webhookKeys.once(events[0]?.once ?? '')))
  t.ok(ttl > Date.parse('2030-04-01T00:00:00Z') - T0, `the once-key outlives the month (${Math.round(ttl / 86_400_000)} days)`)

  receiver.mode = 'down'
  const timeline: string[] = []
  const round = async (label: string): Promise<void> => {
    const attempts = await worker.runOnce()
    timeline.push(`${label}:${attempts}`)
  }
  await round('0s')
  clock += 5_000
  await round('5s')
  clock += 5 * MINUTE
  await round('5m5s')
  clock = T0 + 10 * MINUTE
  receiver.mode = 'up'
  await round('10m')
  t.equal(receiver.delivered.length, 0, 'nothing is due at 10 minutes: the next attempt waits its 30 minutes')
  clock = T0 + 5_000 + 5 * MINUTE + 30 * MINUTE
  await round('35m5s')
  t.same(timeline, ['0s:3', '5s:3', '5m5s:3', '10m:0', '35m5s:3'], 'attempts per round follow the schedule')
  t.same(receiver.delivered.map((d) => d.id).sort(), events.map((e) => e.id).sort(), 'every event delivered, each once by id')
  t.same(receiver.delivered.map((d) => [d.type, d.data.threshold, d.data.units, d.data.limit]).sort(),
    [['quota.exceeded', undefined, 10, 10], ['quota.threshold', 0.8, 8, 10], ['quota.threshold', 1, 10, 10]])
  t.equal(receiver.refused, 0, 'every signature verified')
  for (const event of events) t.equal(ids.filter((id) => id === event.id).length, 4, `${event.id}: 4 attempts, one webhook-id`)
  t.same([results.filter((r) => r === 'failure').length, results.filter((r) => r === 'success').length], [9, 3])
  t.equal(await processA.depth(), 0, 'the queue is empty')
  await round('later')
  t.equal(receiver.delivered.length, 3, 'nothing is delivered twice')
})

t.test('past the last attempt: a dead letter, readable and replayable; the schedule lasts more than a day', async (t) => {
  const redis = await startRedis(t)
  const receiver = await startReceiver(t, SECRET)
  const sender = createSender()
  t.teardown(() => sender.close())
  let clock = T0
  const queue = await redisQueue(t, redis.url)
  const worker = createDeliveryWorker({ queue, sender, config: () => configFor(receiver), now: () => clock })
  // An entry that is not a job (written by something else) is dropped, not claimed forever.
  await redis.cli('XADD', webhookKeys.stream, '*', 'junk', 'x')
  t.equal(await worker.runOnce(), 0)
  t.equal(await redis.cli('XLEN', webhookKeys.stream), '0', 'the stray entry is gone')
  const event = crossing('globex', 0.8)
  await queue.emit(event, ['hooks'], clock)
  receiver.mode = 'down'
  await worker.runOnce()
  for (const delay of DEFAULT_RETRY_SCHEDULE_MS) {
    clock += delay - 1
    t.equal(await worker.runOnce(), 0, `not before its ${delay} ms`)
    clock += 1
    t.equal(await worker.runOnce(), 1)
  }
  t.ok(clock - T0 > 86_400_000, `the last attempt ${((clock - T0) / 3_600_000).toFixed(2)} h after the first`)
  t.equal(receiver.attempts, 8, 'eight attempts')
  const dead = await queue.deadLetters(10)
  t.match(dead, [{ job: { id: event.id, endpoint: 'hooks', type: 'quota.threshold', attempt: 8 }, lastError: 'status 503', deadAt: clock }])
  t.equal(await queue.depth(), 0, 'a dead letter is out of the queue')

  receiver.mode = 'up'
  t.equal(await queue.replay(event.id), 1, 'replayed')
  t.same(await queue.deadLetters(10), [])
  await worker.runOnce()
  t.same(receiver.delivered.map((d) => d.id), [event.id], 'delivered with its own id')
})

t.test('a rotated secret signs with both; a redirect is not followed; a silent receiver times out', async (t) => {
  const redis = await startRedis(t)
  const oldSecret = newSecret(3)
  const receiver = await startReceiver(t, oldSecret)
  const sender = createSender({ responseTimeoutMs: 300 })
  t.teardown(() => sender.close())
  const queue = await redisQueue(t, redis.url)
  const clock = T0
  const results: DeliveryResult[] = []
  const worker = createDeliveryWorker({ queue, sender, config: () => configFor(receiver, [SECRET, oldSecret]), now: () => clock, onResult: (_e, r) => results.push(r) })
  await queue.emit(crossing('initech', 0.8), ['hooks'], clock)
  await worker.runOnce()
  t.equal(receiver.delivered.length, 1, 'a receiver still on the previous secret verifies it')
  t.equal(receiver.delivered[0]?.signature.split(' ').length, 2, 'two signatures, space-separated')

  receiver.mode = 'hold'
  await queue.emit(crossing('initech', 1), ['hooks'], clock)
  const started = performance.now()
  await worker.runOnce()
  const waited = performance.now() - started
  t.same(results, ['success', 'failure'], 'a receiver that does not answer is a failed attempt')
  t.ok(waited < 5_000, `given up after ${Math.round(waited)} ms (response timeout 300 ms)`)

  // A 302 to the receiver: not followed, a failed attempt naming why.
  const redirector = createServer((_req, res) => { res.writeHead(302, { location: receiver.url }).end() })
  await new Promise<void>((resolve) => redirector.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { redirector.closeAllConnections(); redirector.close() })
  receiver.mode = 'up'
  const before = receiver.attempts
  const outcome = await sender.send(`http://127.0.0.1:${(redirector.address() as AddressInfo).port}/hooks`, webhookHeaders([SECRET], 'msg_x', Date.now(), '{}'), '{}')
  t.same(outcome, { ok: false, error: 'status 302 (redirects are not followed)' })
  t.equal(receiver.attempts, before, 'the redirect target was never called')
})

t.test('consumers of the group left by processes gone (idle, nothing pending) are forgotten; one holding a job is kept', async (t) => {
  const redis = await startRedis(t)
  const open = (opts = {}): WebhookQueue => {
    const queue = createRedisQueue(new Redis(redis.url), opts)
    t.teardown(() => queue.close())
    return queue
  }
  const gone = open()
  const holding = open()
  await gone.take(1)
  await holding.emit(crossing('hooli', 0.8), ['hooks'], T0)
  t.equal((await holding.take(1)).length, 1, 'a job left pending by a process that dies')
  const survivor = open({ forgetIdleMs: 100, forgetEveryMs: 0 })
  await new Promise((resolve) => setTimeout(resolve, 300))
  t.equal((await survivor.take(1)).length, 0)
  const info = (await redis.cli('XINFO', 'CONSUMERS', webhookKeys.stream, 'gateway')).split('\n')
  const pending = info.flatMap((line, i) => line === 'pending' ? [info[i + 1]] : [])
  t.same(pending, ['1'], 'the idle empty consumer is gone; the one holding a job is kept')
})

t.test('on a Redis Cluster: every key in one slot, the same once-key, queue and settlement', async (t) => {
  const cluster = await startRedisCluster(t)
  const receiver = await startReceiver(t, SECRET)
  const sender = createSender()
  t.teardown(() => sender.close())
  const open = async (): Promise<WebhookQueue> => {
    const client = createRedisClient({ redisClusterNodes: cluster.nodes })
    if (client === undefined || !await waitReady(client, 10_000)) throw new Error('no cluster client')
    const queue = createRedisQueue(client)
    t.teardown(() => queue.close())
    return queue
  }
  const [processA, processB] = [await open(), await open()]
  const event = crossing('umbrella', 0.8)
  t.same([await processA.emit(event, ['hooks'], T0), await processB.emit(event, ['hooks'], T0)], [true, false])
  const worker = createDeliveryWorker({ queue: processB, sender, config: () => configFor(receiver), now: () => T0 })
  t.equal(await worker.runOnce(), 1)
  t.same(receiver.delivered.map((d) => d.id), [event.id])
  t.equal(await processA.depth(), 0)
})
