// The admin API's view of the webhooks (webhooks/plugin.ts): the endpoints in force (never a
// secret), the queue's depth, the dead letters (deliveries that failed their last attempt) and their
// replay — one event by its webhook-id, or all of them — with a fresh retry schedule. On Redis the
// dead letters are every gateway's; with the in-process store, this process's. A replay writes an
// audit log line.
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { ApiError, gatewayErrors } from '../../interface/errors.js'
import type { DeadLetter } from '../webhooks/queue.js'

/** Dead letters listed unless `limit` says otherwise, and the most one read lists. */
export const DEFAULT_DEAD_LETTERS = 100
export const MAX_DEAD_LETTERS_READ = 1_000

const webhookErrors = {
  deadLetterNotFound: (id: string) => new ApiError('not_found', `No dead letter for event ${id}`),
  queueNoAnswer: () => gatewayErrors.unavailable('The webhook queue did not answer; try again')
}

const replayParams = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', pattern: '^(msg_[A-Za-z0-9_-]{1,64}|all)$' } }
} as const

const listQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { limit: { type: 'integer', minimum: 1, maximum: MAX_DEAD_LETTERS_READ } }
} as const

function letterView (letter: DeadLetter): Record<string, unknown> {
  const { job } = letter
  return {
    id: job.id,
    endpoint: job.endpoint,
    type: job.type,
    attempts: job.attempt,
    queuedAt: new Date(job.queuedAt).toISOString(),
    deadAt: new Date(letter.deadAt).toISOString(),
    lastError: letter.lastError,
    payload: JSON.parse(job.body) as unknown
  }
}

async function fromQueue<T> (read: () => Promise<T>): Promise<T> {
  try {
    return await read()
  } catch {
    throw webhookErrors.queueNoAnswer()
  }
}

export const adminWebhookRoutes = fp<{ gateway: FastifyInstance, identity?: string }>(async function adminWebhookRoutes (app, { gateway, identity }) {
  app.get('/admin/webhooks', async () => {
    const config = gateway.gatewayConfig.current.webhooks
    return {
      endpoints: (config?.endpoints ?? []).map((e) => ({ name: e.name, url: e.url, events: e.events, secrets: e.secrets.length })),
      thresholds: config?.thresholds ?? [],
      overageSteps: config?.overageSteps ?? [],
      expiringDays: config?.expiringDays ?? [],
      queueDepth: await fromQueue(() => gateway.webhooks.depth())
    }
  })

  app.get<{ Querystring: { limit?: number } }>('/admin/webhooks/dead-letters', { schema: { querystring: listQuery } }, async (request) => {
    const letters = await fromQueue(() => gateway.webhooks.deadLetters(request.query.limit ?? DEFAULT_DEAD_LETTERS))
    return { deadLetters: letters.map(letterView) }
  })

  app.post<{ Params: { id: string } }>('/admin/webhooks/dead-letters/:id/replay', { schema: { params: replayParams } }, async (request) => {
    const id = request.params.id
    const replayed = await fromQueue(() => gateway.webhooks.replay(id === 'all' ? '*' : id))
    if (replayed === 0 && id !== 'all') throw webhookErrors.deadLetterNotFound(id)
    gateway.log.info({ audit: true, webhookId: id, replayed, who: identity ?? 'loopback', client: request.ip, at: new Date().toISOString() }, 'webhook dead letters replayed')
    return { id, replayed }
  })
}, { name: 'gateway-admin-webhooks' })
