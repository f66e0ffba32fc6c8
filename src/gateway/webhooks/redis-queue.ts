// The durable queue: a Redis stream read through a consumer group, so an event queued is delivered
// even if the process that queued it, or the one delivering it, dies. Every process of the fleet
// reads the same group: XREADGROUP hands each job to one of them; a job a dead process took and
// never settled is claimed by another (XAUTOCLAIM) once it has been pending `claimIdleMs`; a job is
// acknowledged (and deleted) only in the same MULTI that settles it — done, a retry in a sorted set
// by due time, or a dead letter — so no crash between the two loses or doubles it. "Once per
// threshold" is the emit script: SET NX on the event's once-key (expiring past its period) and the
// XADDs in one script, so the key is never taken without the event queued. Every key shares the
// hash tag {webhooks}: one Cluster slot, one script may touch them all.
import { hostname } from 'node:os'
import { randomUUID } from 'node:crypto'
import type { Redis, Cluster } from 'ioredis'
import { KEY_PREFIX } from '../redis/keys.js'
import { eventBody } from './events.js'
import { jobsOf, MAX_DEAD_LETTERS, type DeadLetter, type DeliveryJob, type TakenJob, type WebhookQueue } from './queue.js'

/** A job pending this long in a process's hands (real time, Redis's idle count) is claimed by another: longer than any attempt. */
export const DEFAULT_CLAIM_IDLE_MS = 60_000
export const WEBHOOK_GROUP = 'gateway'
/** A consumer of the group (a process gone: each start is a new one) with nothing pending is forgotten after this long idle. */
export const DEFAULT_FORGET_IDLE_MS = 3_600_000
/** How often a process looks for such consumers (real time). */
export const DEFAULT_FORGET_EVERY_MS = 600_000

export const webhookKeys = {
  once: (key: string): string => `${KEY_PREFIX}{webhooks}:once:${key}`,
  stream: `${KEY_PREFIX}{webhooks}:q`,
  retries: `${KEY_PREFIX}{webhooks}:retry`,
  dead: `${KEY_PREFIX}{webhooks}:dead`
} as const

/**
 * KEYS[1] the once-key, KEYS[2] the stream; ARGV[1] the once-key's lifetime (ms), ARGV[2..] one job
 * (JSON) per endpoint. Returns 1 when the jobs were queued, 0 when the once-key was already taken.
 */
const EMIT = `if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then return 0 end
for i = 2, #ARGV do redis.call('XADD', KEYS[2], '*', 'job', ARGV[i]) end
return 1`

/** KEYS[1] the retries (sorted by due ms), KEYS[2] the stream; ARGV[1] now (ms), ARGV[2] at most this many. Returns how many moved. */
const PROMOTE = `local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, job in ipairs(due) do
  redis.call('ZREM', KEYS[1], job)
  redis.call('XADD', KEYS[2], '*', 'job', job)
end
return #due`

/**
 * KEYS[1] the dead letters (a list of JSON {job, deadAt, lastError} with `job` a JSON string), KEYS[2]
 * the stream; ARGV[1] an event id or '*'. Queues the matching letters' jobs again, marked `replayed`
 * (a fresh schedule); returns how many.
 */
const REPLAY = `local letters = redis.call('LRANGE', KEYS[1], 0, -1)
local count = 0
for _, entry in ipairs(letters) do
  local letter = cjson.decode(entry)
  local job = cjson.decode(letter.job)
  if ARGV[1] == '*' or job.id == ARGV[1] then
    redis.call('LREM', KEYS[1], 1, entry)
    redis.call('XADD', KEYS[2], '*', 'job', letter.job, 'replayed', '1')
    count = count + 1
  end
end
return count`

type Client = Redis | Cluster
type StreamEntry = [string, string[]]

function jobOf (fields: string[]): DeliveryJob | undefined {
  const at = fields.indexOf('job')
  const text = at < 0 ? undefined : fields[at + 1]
  if (text === undefined) return undefined
  let job: DeliveryJob
  try {
    job = JSON.parse(text) as DeliveryJob
  } catch {
    return undefined
  }
  return fields.includes('replayed') ? { ...job, attempt: 0 } : job
}

export interface RedisQueueOptions {
  claimIdleMs?: number
  /** A consumer of the group idle this long with nothing pending is dropped (default an hour). */
  forgetIdleMs?: number
  /** How often this process looks for them (default every 10 minutes, the first time 10 minutes after it started). */
  forgetEveryMs?: number
}

export function createRedisQueue (client: Client, opts: RedisQueueOptions = {}): WebhookQueue {
  const claimIdleMs = opts.claimIdleMs ?? DEFAULT_CLAIM_IDLE_MS
  const forgetIdleMs = opts.forgetIdleMs ?? DEFAULT_FORGET_IDLE_MS
  const forgetEveryMs = opts.forgetEveryMs ?? DEFAULT_FORGET_EVERY_MS
  /** This process's name in the group: a restarted process is a new consumer, its predecessor's jobs are claimed. */
  const consumer = `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`
  let grouped = false
  let lastForget = performance.now()

  /** Drops the group's consumers idle for an hour with nothing pending: restarts would otherwise pile them up. */
  async function forgetGone (): Promise<void> {
    if (performance.now() - lastForget < forgetEveryMs) return
    lastForget = performance.now()
    const consumers = await client.xinfo('CONSUMERS', webhookKeys.stream, WEBHOOK_GROUP) as Array<Array<string | number>>
    for (const fields of consumers) {
      const field = (name: string): string | number | undefined => fields[fields.indexOf(name) + 1]
      const name = String(field('name'))
      if (name !== consumer && Number(field('pending')) === 0 && Number(field('idle')) > forgetIdleMs) {
        await client.xgroup('DELCONSUMER', webhookKeys.stream, WEBHOOK_GROUP, name)
      }
    }
  }

  async function ensureGroup (): Promise<void> {
    if (grouped) return
    try {
      await client.xgroup('CREATE', webhookKeys.stream, WEBHOOK_GROUP, '0', 'MKSTREAM')
    } catch (err) {
      if (!(err instanceof Error) || !err.message.includes('BUSYGROUP')) throw err
    }
    grouped = true
  }

  /** Drops a taken entry and runs `also` in the same transaction. */
  async function settle (taken: TakenJob, also: (multi: ReturnType<Client['multi']>) => void): Promise<void> {
    const multi = client.multi().xack(webhookKeys.stream, WEBHOOK_GROUP, taken.ref).xdel(webhookKeys.stream, taken.ref)
    also(multi)
    await multi.exec()
  }

  /** The jobs of `list`; an entry that is not one (written by something else) is dropped, or it would be claimed forever. */
  async function entries (list: StreamEntry[] | null | undefined): Promise<TakenJob[]> {
    const jobs: TakenJob[] = []
    for (const [ref, fields] of list ?? []) {
      const job = jobOf(fields)
      if (job !== undefined) jobs.push({ ref, job })
      else await settle({ ref, job: { id: '', endpoint: '', type: 'webhook.test', body: '', attempt: 0, queuedAt: 0 } }, () => {})
    }
    return jobs
  }

  return {
    kind: 'redis',
    async emit (event, endpoints, now) {
      const jobs = jobsOf(event, eventBody(event), endpoints, now).map((job) => JSON.stringify(job))
      const queued = await client.eval(EMIT, 2, webhookKeys.once(event.once), webhookKeys.stream, String(Math.ceil(event.onceTtlMs)), ...jobs)
      return queued === 1
    },
    async promote (now) {
      return Number(await client.eval(PROMOTE, 2, webhookKeys.retries, webhookKeys.stream, String(now), '100'))
    },
    async take (max) {
      await ensureGroup()
      try {
        await forgetGone()
        const claimed = await client.xautoclaim(webhookKeys.stream, WEBHOOK_GROUP, consumer, claimIdleMs, '0-0', 'COUNT', max) as [string, StreamEntry[], string[]]
        const stale = await entries(claimed[1])
        if (stale.length > 0) return stale
        const read = await client.xreadgroup('GROUP', WEBHOOK_GROUP, consumer, 'COUNT', max, 'STREAMS', webhookKeys.stream, '>') as Array<[string, StreamEntry[]]> | null
        return await entries(read?.[0]?.[1])
      } catch (err) {
        // Redis lost the stream (a restart without persistence): make the group again next time.
        if (err instanceof Error && err.message.includes('NOGROUP')) grouped = false
        throw err
      }
    },
    async done (taken) { await settle(taken, () => {}) },
    async retry (taken, job, dueAt) {
      await settle(taken, (multi) => { multi.zadd(webhookKeys.retries, dueAt, JSON.stringify(job)) })
    },
    async dead (taken, letter) {
      const entry = JSON.stringify({ job: JSON.stringify(letter.job), deadAt: letter.deadAt, lastError: letter.lastError })
      await settle(taken, (multi) => { multi.lpush(webhookKeys.dead, entry).ltrim(webhookKeys.dead, 0, MAX_DEAD_LETTERS - 1) })
    },
    async deadLetters (max) {
      const list = await client.lrange(webhookKeys.dead, 0, max - 1)
      return list.map((entry) => {
        const letter = JSON.parse(entry) as { job: string, deadAt: number, lastError: string }
        return { job: JSON.parse(letter.job) as DeliveryJob, deadAt: letter.deadAt, lastError: letter.lastError } satisfies DeadLetter
      })
    },
    async replay (id) {
      return Number(await client.eval(REPLAY, 2, webhookKeys.dead, webhookKeys.stream, id))
    },
    async depth () {
      const [streamLength, retries] = await Promise.all([client.xlen(webhookKeys.stream), client.zcard(webhookKeys.retries)])
      return streamLength + retries
    },
    async close () {
      client.disconnect()
    }
  }
}
