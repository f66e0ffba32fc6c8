// Webhooks in the gateway: the request path only notes its decision (onResponse: a Map lookup when
// the month, a refusal or a ban is in it), the history's flushes note the month counts, a timer scans
// the keys for expiries; everything else runs in the background on one loop of its own — handing the
// events found to the queue (once-keyed), and delivering (deliver.ts). The queue is Redis when the
// limiter's settings select Redis (durable, once across processes), else this process's memory. No
// connection is made and no timer does work until the config in force has an endpoint.
import fp from 'fastify-plugin'
import { createRedisClient, waitReady, type RedisSettings } from '../redis/connection.js'
import type { WebhooksConfig } from './config.js'
import { createDeliveryWorker, DEFAULT_POLL_MS, subscribers, type DeliveryWorker } from './deliver.js'
import { createDetector } from './detect.js'
import { createSender, type HttpOptions } from './http.js'
import { createMemoryQueue, type DeadLetter, type WebhookQueue } from './queue.js'
import { createRedisQueue } from './redis-queue.js'

/** How often the keys are scanned for expiries (real time). */
export const DEFAULT_EXPIRY_SCAN_MS = 60_000
/** A closing gateway waits this long for a delivery round in flight; past it the round's job stays pending in Redis and another process delivers it. */
export const CLOSE_WAIT_MS = 2_000
/** The queue's Redis connection, as CLIENT LIST names it. */
export const WEBHOOKS_CONNECTION = 'petstore-webhooks'
const REDIS_READY_MS = 2_000

export interface WebhookOptions extends HttpOptions {
  /** Waits before each retry (deliver.ts DEFAULT_RETRY_SCHEDULE_MS); tests shorten nothing, they move the clock. */
  retryScheduleMs?: readonly number[]
  /** The background loop's period (real time). */
  pollMs?: number
  /** Redis queue: a job pending this long in a dead process's hands is delivered by another. */
  claimIdleMs?: number
  expiryScanMs?: number
  /** A ready queue (tests); default: Redis with the limiter's settings, else in-process. */
  queue?: WebhookQueue
}

export interface WebhooksPluginOptions extends WebhookOptions {
  settings?: RedisSettings | undefined
}

export interface Webhooks {
  /** Dead letters, newest first. */
  deadLetters: (max: number) => Promise<DeadLetter[]>
  /** Queues the dead letters of event `id` (or `*`: all) again; how many. */
  replay: (id: string) => Promise<number>
  /** Jobs waiting in the queue (0 before any endpoint was configured). */
  depth: () => Promise<number>
  /** One round of the loop now: hand on the events found, deliver what is due. */
  runOnce: () => Promise<void>
}

declare module 'fastify' {
  interface FastifyInstance {
    webhooks: Webhooks
  }
}

export const webhooksPlugin = fp<WebhooksPluginOptions>(async function webhooksPlugin (app, opts) {
  const config = (): WebhooksConfig | undefined => app.gatewayConfig.current.webhooks
  const configured = (): boolean => (config()?.endpoints.length ?? 0) > 0
  const detector = createDetector(config)
  const sender = createSender(opts)
  const metrics = app.hasDecorator('metrics') ? app.metrics : undefined

  let queue: WebhookQueue | undefined = opts.queue
  let opening: Promise<WebhookQueue> | undefined
  /** The queue, opened at its first use. */
  async function queueNow (): Promise<WebhookQueue> {
    if (queue !== undefined) return queue
    opening ??= (async () => {
      const client = opts.settings === undefined ? undefined : createRedisClient(opts.settings, { connectionName: WEBHOOKS_CONNECTION })
      if (client === undefined) return createMemoryQueue()
      client.on('error', () => {})
      await waitReady(client, REDIS_READY_MS)
      return createRedisQueue(client, { claimIdleMs: opts.claimIdleMs })
    })()
    queue = await opening
    return queue
  }

  let worker: DeliveryWorker | undefined
  async function workerNow (): Promise<DeliveryWorker> {
    worker ??= createDeliveryWorker({
      queue: await queueNow(),
      sender,
      config,
      now: app.clock,
      retryScheduleMs: opts.retryScheduleMs,
      onResult: (event, result) => metrics?.webhookDeliveries.inc({ event, result }),
      onError: (err) => app.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'webhooks: delivery round failed; the job is retried')
    })
    return worker
  }

  /** Hands the events found to the queue; those it could not (Redis not answering) wait for the next round. */
  async function emitFound (): Promise<void> {
    const found = detector.drain()
    if (found.length === 0) return
    const target = await queueNow()
    for (let i = 0; i < found.length; i++) {
      const event = found[i]
      if (event === undefined) continue
      const endpoints = subscribers(config(), event.type)
      if (endpoints.length === 0) continue
      try {
        const queued = await target.emit(event, endpoints, app.clock())
        app.log.info({ webhookId: event.id, event: event.type, consumer: event.data.consumerId, queued }, queued ? 'webhook event queued' : 'webhook event already emitted')
      } catch (err) {
        detector.putBack(found.slice(i))
        throw err
      }
    }
  }

  let lastScan = -Infinity
  const expiryScanMs = opts.expiryScanMs ?? DEFAULT_EXPIRY_SCAN_MS
  async function runOnce (): Promise<void> {
    if (!configured() && queue === undefined) return
    if (performance.now() - lastScan >= expiryScanMs) {
      lastScan = performance.now()
      detector.scanExpiring(app.gatewayConfig.current, app.clock())
    }
    await emitFound()
    await (await workerNow()).runOnce()
    metrics?.webhookQueueDepth.set(await (await queueNow()).depth())
  }

  let timer: NodeJS.Timeout | undefined
  let round: Promise<void> = Promise.resolve()
  let closed = false
  let failing = false
  function schedule (): void {
    if (closed) return
    timer = setTimeout(() => {
      round = runOnce().then(() => { failing = false }, (err: unknown) => {
        // One line when rounds start failing, not one per round.
        if (!failing) app.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'webhooks: round failed (queue not answering?); retrying')
        failing = true
      }).finally(schedule)
    }, opts.pollMs ?? DEFAULT_POLL_MS)
    timer.unref()
  }
  schedule()

  if (app.hasDecorator('history')) {
    app.history.onMonthCount((cell, units) => {
      const overage = app.gatewayConfig.current.plans.get(cell.plan)?.overage === true
      detector.noteMonth({ consumerId: cell.consumerId, plan: cell.plan, units, quota: cell.quota, overage, at: cell.last })
    })
  }
  app.addHook('onResponse', function noteWebhookEvents (request, _reply, done) {
    const decision = request.rateLimit
    if (decision !== null && request.consumer !== null) detector.noteDecision(request.consumer, decision)
    done()
  })

  app.decorate('webhooks', {
    deadLetters: async (max) => await (await queueNow()).deadLetters(max),
    replay: async (id) => await (await queueNow()).replay(id),
    depth: async () => queue === undefined ? 0 : await queue.depth(),
    runOnce: async () => { await round; await runOnce() }
  } satisfies Webhooks)
  app.addHook('onClose', async () => {
    closed = true
    clearTimeout(timer)
    let waited: NodeJS.Timeout | undefined
    await Promise.race([round, new Promise<void>((resolve) => { waited = setTimeout(resolve, CLOSE_WAIT_MS) })])
    clearTimeout(waited)
    // What was found and not yet handed on goes to the queue now (on Redis it outlives this process).
    await emitFound().catch(() => undefined)
    await queue?.close()
    await sender.close()
  })
}, { name: 'gateway-webhooks', dependencies: ['gateway-clock', 'gateway-config'] })
