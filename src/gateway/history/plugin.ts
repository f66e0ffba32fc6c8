// The usage history and the shadow records in the gateway: the limiter tells the tally (tally.ts)
// each consumer's decision in the request — a Map lookup and an increment — and a flusher writes what
// was counted to the history store every DEFAULT_HISTORY_FLUSH_MS (and on close) in one write, off
// the hot path. A write that fails is kept and sent with the next one (counts of days and hours no
// longer served are dropped), so a Redis outage delays the history rather than losing it; a crash
// loses at most the counts of one interval; while Redis does not answer at all, an admin read or a
// close waits DEFAULT_HISTORY_WAIT_MS for it, never longer. The store is Redis when the limiter's settings select
// Redis, else this process's memory (per process, and the admin API says so). On Redis the history
// has two connections of its own, neither the limiter's, so nothing it does or waits for counts
// against the limiter's timeouts, breaker or fallback: flushes on one (no command timeout: a write
// is never sent twice), admin reads on the other (each command DEFAULT_HISTORY_READ_TIMEOUT_MS at most).
// Each flush also tells the quota watch (quota-watch.ts) the month's units of the consumers with a
// month quota it wrote, for gateway_quota_consumers_near_limit.
import fp from 'fastify-plugin'
import type { DecisionRecorder } from '../limiter/decision.js'
import { createRedisClient, type RedisSettings } from '../redis/connection.js'
import { dayOf, daysOfMonth, hourOf } from './days.js'
import { settlesWithin } from './deadline.js'
import { createMemoryHistory } from './memory-history.js'
import { createQuotaWatch, type NearLimit } from './quota-watch.js'
import { createRedisHistory } from './redis-history.js'
import { SHADOW_WINDOW_HOURS, USAGE_HISTORY_DAYS, USAGE_KEY_KEEP_DAYS, type HistoryStore } from './store.js'
import { DecisionTally, EMPTY_BATCH, isEmpty, mergeBatches, type Batch, type MonthCell } from './tally.js'

/** How often a process writes what it counted: the most a crash can lose, and how late another process's counts show. */
export const DEFAULT_HISTORY_FLUSH_MS = 5_000
/** How long an admin read or a closing gateway waits for a flush (and a read) while Redis does not answer. */
export const DEFAULT_HISTORY_WAIT_MS = 2_000
/** A command of an admin read on the history's read connection fails after this (ioredis commandTimeout). */
export const DEFAULT_HISTORY_READ_TIMEOUT_MS = 1_000
/** The history's connections as Redis's CLIENT LIST names them. */
export const HISTORY_WRITE_CONNECTION = 'petstore-history'
export const HISTORY_READ_CONNECTION = 'petstore-history-read'

export interface HistoryOptions {
  /** A ready history store (the gateway closes it); default: Redis when the limiter's settings select Redis, else in-process. */
  store?: HistoryStore
  flushMs?: number
  waitMs?: number
}

export interface HistoryPluginOptions extends HistoryOptions {
  /** The limiter's store settings: the history lives where the limits are counted. */
  settings?: RedisSettings | undefined
}

export interface History {
  /** Where the history is read (the admin API). */
  readonly store: HistoryStore
  /** What the limiter tells each consumer's decision. */
  readonly recorder: DecisionRecorder
  /** Writes this process's counts now (an admin read does, so its own process is never behind); waits DEFAULT_HISTORY_WAIT_MS at most. */
  flush: () => Promise<void>
  /** Consumers decided in the last hour at or over 90 % of their month's quota at the latest flush (quota-watch.ts). */
  nearLimit: (now: number) => NearLimit[]
  /** Tells `listener` each month cell a flush wrote, with the consumer's units of that month (the webhooks' thresholds). */
  onMonthCount: (listener: MonthListener) => void
}

export type MonthListener = (cell: MonthCell, units: number) => void

declare module 'fastify' {
  interface FastifyInstance {
    history: History
  }
}

function storeOf (opts: HistoryPluginOptions, now: () => number): HistoryStore {
  if (opts.store !== undefined) return opts.store
  const client = opts.settings === undefined ? undefined : createRedisClient(opts.settings, { connectionName: HISTORY_WRITE_CONNECTION })
  if (client === undefined || opts.settings === undefined) return createMemoryHistory({ now })
  const waitMs = opts.waitMs ?? DEFAULT_HISTORY_WAIT_MS
  const reader = createRedisClient(opts.settings, { connectionName: HISTORY_READ_CONNECTION, commandTimeout: Math.min(waitMs, DEFAULT_HISTORY_READ_TIMEOUT_MS) })
  // The limiter's own client reports connection errors; a failed flush is retried with the next one.
  // Not waited for here: a Redis that is down must not delay the start twice (the limiter waits).
  client.on('error', () => {})
  reader?.on('error', () => {})
  return createRedisHistory(client, { readWaitMs: waitMs, reader })
}

export const historyPlugin = fp<HistoryPluginOptions>(async function historyPlugin (app, opts) {
  const now = app.clock
  const store = storeOf(opts, now)
  const tally = new DecisionTally()
  const watch = createQuotaWatch()
  const monthListeners: MonthListener[] = []
  const noteMonth = (cell: MonthCell, units: number): void => {
    watch.note(cell, units)
    for (const listener of monthListeners) listener(cell, units)
  }
  let unsent: Batch = EMPTY_BATCH
  let chain = Promise.resolve()

  async function flushOnce (): Promise<void> {
    const at = now()
    const batch = mergeBatches([unsent, tally.drain()], {
      day: (day) => day > dayOf(at) - USAGE_HISTORY_DAYS,
      hour: (hour) => hour >= hourOf(at) - SHADOW_WINDOW_HOURS,
      month: (month) => daysOfMonth(month).next + USAGE_KEY_KEEP_DAYS > dayOf(at)
    })
    unsent = EMPTY_BATCH
    if (isEmpty(batch)) return
    try {
      unsent = await store.write(batch, noteMonth)
    } catch (err) {
      unsent = batch
      app.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'history: write failed, kept for the next flush')
    }
  }

  /** One flush at a time, in order: a flush asked for during another runs after it. */
  let queued = 0
  function enqueue (): Promise<void> {
    queued++
    chain = chain.then(flushOnce).finally(() => { queued-- })
    return chain
  }

  const waitMs = opts.waitMs ?? DEFAULT_HISTORY_WAIT_MS
  async function flush (): Promise<void> {
    await settlesWithin(enqueue(), waitMs)
  }

  // A write still waiting for Redis is not queued behind: the tally goes on counting meanwhile.
  const timer = setInterval(() => { if (queued === 0) void enqueue() }, opts.flushMs ?? DEFAULT_HISTORY_FLUSH_MS)
  timer.unref()
  app.decorate('history', { store, recorder: tally, flush, nearLimit: watch.nearLimit, onMonthCount: (listener) => { monthListeners.push(listener) } })
  app.addHook('onClose', async () => {
    clearInterval(timer)
    await flush()
    await store.close()
  })
}, { name: 'gateway-history', dependencies: ['gateway-clock'] })
