// Delivery in the background: every `pollMs` the worker moves the retries now due back into the
// queue, takes a few jobs and attempts each once, signed afresh (same webhook-id and body, the
// attempt's timestamp). A failed attempt goes back for a retry after the schedule's next delay; after
// the last one it is a dead letter. Time is the injected clock's (the schedule is tested in
// milliseconds); only the polling and the webhook-timestamp header run on real time. Nothing here is on the request path.
import { endpointsFor, type WebhookEndpoint, type WebhooksConfig } from './config.js'
import type { EventType } from './events.js'
import type { AttemptOutcome, WebhookSender } from './http.js'
import type { TakenJob, WebhookQueue } from './queue.js'
import { webhookHeaders } from './sign.js'

/**
 * Waits before each retry, Svix's schedule: the first attempt at once, then after 5 s, 5 min, 30 min,
 * 2 h, 5 h, 10 h and 10 h — eight attempts over 27 h 35 min 5 s, then a dead letter.
 */
export const DEFAULT_RETRY_SCHEDULE_MS: readonly number[] = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]
export const DEFAULT_POLL_MS = 500
/** Jobs taken at once (attempted concurrently). */
export const DEFAULT_BATCH = 16

export type DeliveryResult = 'success' | 'failure' | 'dead'

export interface DeliveryOptions {
  queue: WebhookQueue
  sender: WebhookSender
  /** The webhooks in force now (a reload changes URLs and secrets for the next attempt). */
  config: () => WebhooksConfig | undefined
  now: () => number
  /**
   * Real time, for the webhook-timestamp header (default Date.now): receivers refuse a timestamp far
   * from their own clock (replay protection), whatever the gateway's injected clock says.
   */
  wallClock?: () => number
  retryScheduleMs?: readonly number[]
  batch?: number
  /** Told each attempt's result: the metrics. */
  onResult?: (event: EventType, result: DeliveryResult) => void
  onError?: (err: unknown) => void
}

export interface DeliveryWorker {
  /** One round: promote due retries, take a batch, attempt each. Resolves with the number of attempts. */
  runOnce: () => Promise<number>
}

function endpointNamed (config: WebhooksConfig | undefined, name: string): WebhookEndpoint | undefined {
  return config?.endpoints.find((endpoint) => endpoint.name === name)
}

export function createDeliveryWorker (opts: DeliveryOptions): DeliveryWorker {
  const schedule = opts.retryScheduleMs ?? DEFAULT_RETRY_SCHEDULE_MS
  const batch = opts.batch ?? DEFAULT_BATCH

  async function attempt (taken: TakenJob): Promise<void> {
    const { job } = taken
    const endpoint = endpointNamed(opts.config(), job.endpoint)
    const sentAt = (opts.wallClock ?? Date.now)()
    let outcome: AttemptOutcome
    if (endpoint === undefined) outcome = { ok: false, error: 'endpoint no longer configured' }
    else outcome = await opts.sender.send(endpoint.url, webhookHeaders(endpoint.secrets, job.id, sentAt, job.body), job.body)
    const tried = { ...job, attempt: job.attempt + 1 }
    if (outcome.ok) {
      await opts.queue.done(taken)
      opts.onResult?.(job.type, 'success')
      return
    }
    const delay = schedule[job.attempt]
    if (endpoint !== undefined && delay !== undefined) {
      await opts.queue.retry(taken, tried, opts.now() + delay)
      opts.onResult?.(job.type, 'failure')
    } else {
      await opts.queue.dead(taken, { job: tried, deadAt: opts.now(), lastError: outcome.error })
      opts.onResult?.(job.type, 'dead')
    }
  }

  return {
    async runOnce () {
      await opts.queue.promote(opts.now())
      const jobs = await opts.queue.take(batch)
      await Promise.all(jobs.map(async (taken) => {
        try {
          await attempt(taken)
        } catch (err) {
          // Unsettled: the job stays pending and is claimed again (Redis) once idle.
          opts.onError?.(err)
        }
      }))
      return jobs.length
    }
  }
}

/** The names of the endpoints in `config` subscribed to `event`. */
export function subscribers (config: WebhooksConfig | undefined, event: EventType): string[] {
  return event === 'webhook.test' ? [] : endpointsFor(config, event).map((endpoint) => endpoint.name)
}
