// Every metric of docs/decisions.md §9 on a Registry of the gateway's own (never prom-client's global one, so
// several gateways in one process — tests, the bench — neither share nor collide). Labels come only
// from bounded sets (route patterns, methods, statuses, plans, windows, results), and labelled
// counters start at 0 for their known sets so every name is there from the first scrape.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import { OPERATIONS, type Operation } from '../../proxy/operations.js'
import { registerKeyExpiryGauges, type KeyExpirySource } from './key-expiry-gauges.js'
import type { LimiterStatus } from './limiter-status.js'
import { registerQuotaGauges, type NearLimitSource } from './quota-gauges.js'
import { ANONYMOUS_PLAN, UNMATCHED_ROUTE } from '../../../shared/labels.js'
import { DROP_REASONS, type SpanCounts } from '../../../shared/tracing/span-counts.js'

/** Seconds, from a cache-hot sub-millisecond answer to the 10 s upstream timeout. */
export const DEFAULT_DURATION_BUCKETS: readonly number[] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
export const WINDOWS = ['minute', 'day', 'month'] as const
/** `window` of a 429: the window that refused, or `ban` for a key answered `key_banned`. */
export const REJECTION_WINDOWS = [...WINDOWS, 'ban'] as const
export const RELOAD_RESULTS = ['success', 'failure'] as const
/** `result` of a webhook attempt: delivered; failed, to be retried; failed for the last time (a dead letter). */
export const WEBHOOK_RESULTS = ['success', 'failure', 'dead'] as const
export const WEBHOOK_EVENT_TYPES = ['quota.threshold', 'quota.exceeded', 'key.banned', 'key.expiring', 'webhook.test'] as const
/**
 * `reason` of a request answered 503 to shed load: `overload` at the edge (the gateway itself is
 * over capacity), `upstream_queue_full` / `upstream_budget` at the upstream gate (no backend
 * connection in time).
 */
export const SHED_REASONS = ['overload', 'upstream_queue_full', 'upstream_budget'] as const
export type ShedReason = (typeof SHED_REASONS)[number]

/** What the metrics read at scrape time about load shedding and the backend's connections. */
export interface SheddingStatus {
  /** Requests shed since start, by reason (cumulative). */
  shed: () => Partial<Record<ShedReason, number>>
  /** Requests holding / waiting for a backend connection now; undefined without a proxy. */
  upstream: () => { inFlight: number, queued: number } | undefined
  /** Requests in flight through the gateway, and the load-shedding limit (0: shedding off). */
  concurrency: () => { inFlight: number, limit: number } | undefined
  /** Load shedding's last window: the event loop's median delay and the standing wait for a backend connection (ms). */
  queueDelays: () => { loop: number, upstream: number } | undefined
}

const LINT_FAILING_DEFAULTS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']

type RequestLabel = 'route' | 'method' | 'status' | 'plan'

interface RequestCell {
  readonly labels: Readonly<Record<RequestLabel, string>>
  value: number
  flushed: number
}

function child<K, V> (map: Map<K, V>, key: K, make: () => V): V {
  let value = map.get(key)
  if (value === undefined) {
    value = make()
    map.set(key, value)
  }
  return value
}

type ByStatus = Map<number, RequestCell>
type ByPlan = Map<string, ByStatus>
type ByMethod = Map<string, ByPlan>
const newByMethod = (): ByMethod => new Map()
const newByPlan = (): ByPlan => new Map()
const newByStatus = (): ByStatus => new Map()

/**
 * gateway_requests_total on the hot path: one cell per label set, reached by Map lookups on strings
 * that already exist (no label object, no key string per request). prom-client sees the counts when
 * it is scraped.
 */
export class RequestCounts {
  private readonly byRoute = new Map<string, ByMethod>()
  private readonly cells: RequestCell[] = []

  count (route: string, method: string, plan: string, status: number, by = 1): void {
    const byStatus = child(child(child(this.byRoute, route, newByMethod), method, newByPlan), plan, newByStatus)
    let cell = byStatus.get(status)
    if (cell === undefined) {
      cell = { labels: { route, method, status: String(status), plan }, value: 0, flushed: 0 }
      byStatus.set(status, cell)
      this.cells.push(cell)
    }
    cell.value += by
  }

  flushTo (counter: Counter<RequestLabel>): void {
    for (const cell of this.cells) {
      counter.inc(cell.labels, cell.value - cell.flushed)
      cell.flushed = cell.value
    }
  }
}

/** prom-client's storage of one histogram label set (v15): counts per upper bound, not cumulative. */
interface HistogramEntry { labels: Record<string, string>, bucketValues: Record<string, number>, sum: number, count: number }

interface DurationCell {
  readonly labels: Readonly<Record<'route', string>>
  /** Observations per bucket (not cumulative); the last slot holds those above every bound (+Inf only). */
  readonly counts: Float64Array
  sum: number
  count: number
}

/**
 * A duration histogram by route on the hot path: one Map lookup and two array writes per
 * observation, where prom-client's own `observe` builds and validates a label set and hashes it
 * into a string every time. prom-client sees the totals when it is scraped (`flushTo` from the
 * histogram's collect()), so the exposition is prom-client's, unchanged.
 */
export class RouteDurations {
  private readonly cells = new Map<string, DurationCell>()

  private readonly bounds: readonly number[]

  constructor (bounds: readonly number[]) {
    this.bounds = bounds
  }

  private cell (route: string): DurationCell {
    let cell = this.cells.get(route)
    if (cell === undefined) {
      cell = { labels: Object.freeze({ route }), counts: new Float64Array(this.bounds.length + 1), sum: 0, count: 0 }
      this.cells.set(route, cell)
    }
    return cell
  }

  observe (route: string, seconds: number): void {
    const cell = this.cell(route)
    const bounds = this.bounds
    let i = 0
    while (i < bounds.length && seconds > (bounds[i] as number)) i++
    cell.counts[i] = (cell.counts[i] as number) + 1
    cell.sum += seconds
    cell.count++
  }

  /** Exposes `route` at 0 from the first scrape. */
  zero (route: string): void {
    this.cell(route)
  }

  /** Writes every route's totals into `histogram` (prom-client 15's storage: a test scrapes buckets, sum and count). */
  flushTo (histogram: Histogram<'route'>): void {
    const storage = histogram as unknown as { hashMap: Record<string, HistogramEntry> }
    for (const cell of this.cells.values()) {
      histogram.zero(cell.labels)
      const entry = Object.values(storage.hashMap).find((e) => e.labels.route === cell.labels.route)
      if (entry === undefined) continue
      this.bounds.forEach((bound, i) => { entry.bucketValues[bound] = cell.counts[i] ?? 0 })
      entry.sum = cell.sum
      entry.count = cell.count
    }
  }
}

export interface GatewayMetrics {
  readonly registry: Registry
  readonly requests: RequestCounts
  readonly requestDuration: RouteDurations
  readonly upstreamDuration: RouteDurations
  readonly rateLimitRejections: Counter<'plan' | 'window'>
  readonly bans: Counter<'plan'>
  /** Requests the shadow limits being rehearsed would have rejected (limiter/shadow.ts), by plan and window. */
  readonly shadowRejections: Counter<'plan' | 'window'>
  /** Units admitted past the month's quota under `overage: allow` (billed), by plan. */
  readonly quotaOverage: Counter<'plan'>
  readonly deprecatedRequests: Counter<'route' | 'plan'>
  /** For the config reloader: `configReloads.inc({ result: 'success' | 'failure' })`. */
  readonly configReloads: Counter<'result'>
  /** Webhook delivery attempts by event type and result (webhooks/deliver.ts). */
  readonly webhookDeliveries: Counter<'event' | 'result'>
  /** Webhook jobs waiting (queued, in delivery, waiting for a retry), at the delivery worker's latest round. */
  readonly webhookQueueDepth: Gauge
}

export interface MetricsOptions {
  /** Plan names known now (from the config snapshot); `anonymous` is added. */
  plans: Iterable<string>
  /** Route patterns that are deprecated in the config now, for gateway_deprecated_requests_total. */
  deprecatedRoutes?: Iterable<string>
  /** The limiter's state, read at scrape time; undefined while no limiter is registered. */
  limiterStatus?: () => LimiterStatus | undefined
  operations?: readonly Operation[]
  /** Process and Node metrics (prom-client's default set). */
  defaultMetrics?: boolean
  buckets?: readonly number[]
  /** Config and clock for the key-expiry gauges (key-expiry-gauges.ts), read at scrape time; absent: no such gauges. */
  keyExpiry?: KeyExpirySource
  /** Spans exported and dropped by the tracing SDK, read at scrape time; undefined while tracing is off (the counters stay at 0). */
  traceSpans?: () => SpanCounts | undefined
  /** Load shedding and the upstream gate, read at scrape time; absent: the counters stay at 0. */
  shedding?: SheddingStatus
  /** Consumers near their monthly quota per plan, read at scrape time (quota-gauges.ts); absent: 0. */
  quotaNearLimit?: NearLimitSource
  /** Log lines the logger's destination lost (a closed or full pipe, a full disk), read at scrape time; absent: 0. */
  logLinesDropped?: (() => number) | undefined
}

function successStatus (op: Operation): number {
  return op.method === 'POST' ? 201 : 200
}

export function createGatewayMetrics (opts: MetricsOptions): GatewayMetrics {
  const registry = new Registry()
  if (opts.defaultMetrics !== false) {
    collectDefaultMetrics({ register: registry })
    // Gauges named like counters fail `promtool check metrics`; each is the sum of its by-type gauge.
    for (const name of LINT_FAILING_DEFAULTS) registry.removeSingleMetric(name)
  }
  const registers = [registry]
  const buckets = [...(opts.buckets ?? DEFAULT_DURATION_BUCKETS)]
  const operations = opts.operations ?? OPERATIONS
  const plans = [...new Set([...opts.plans, ANONYMOUS_PLAN])]
  const limiter = opts.limiterStatus ?? (() => undefined)

  const requests = new RequestCounts()
  new Counter<RequestLabel>({
    name: 'gateway_requests_total',
    help: 'Requests answered by the public port, by route pattern, method, status and plan',
    labelNames: ['route', 'method', 'status', 'plan'],
    registers,
    collect () { requests.flushTo(this) }
  })
  const requestDuration = new RouteDurations(buckets)
  new Histogram<'route'>({
    name: 'gateway_request_duration_seconds',
    help: 'Time from receiving a request to the end of its response, by route pattern',
    labelNames: ['route'],
    buckets,
    registers,
    collect () { requestDuration.flushTo(this) }
  })
  const upstreamDuration = new RouteDurations(buckets)
  new Histogram<'route'>({
    name: 'gateway_upstream_duration_seconds',
    help: 'Time the backend took to answer (until its response headers, or its failure), by route pattern',
    labelNames: ['route'],
    buckets,
    registers,
    collect () { upstreamDuration.flushTo(this) }
  })
  const rateLimitRejections = new Counter<'plan' | 'window'>({
    name: 'gateway_ratelimit_rejections_total',
    help: 'Requests answered 429 by the limiter, by plan and window: the full window that admits again last (rate_limited), month for every quota_exceeded, ban for key_banned',
    labelNames: ['plan', 'window'],
    registers
  })
  const bans = new Counter<'plan'>({
    name: 'gateway_bans_total',
    help: 'Bans started by this process, by plan',
    labelNames: ['plan'],
    registers
  })
  const shadowRejections = new Counter<'plan' | 'window'>({
    name: 'gateway_shadow_rejections_total',
    help: 'Requests the shadow limits being rehearsed would have rejected (none was rejected for it), by plan and window',
    labelNames: ['plan', 'window'],
    registers
  })
  const quotaOverage = new Counter<'plan'>({
    name: 'gateway_quota_overage_total',
    help: 'Units admitted past the monthly quota on plans with overage: allow (billed as overage), by plan',
    labelNames: ['plan'],
    registers
  })
  const deprecatedRequests = new Counter<'route' | 'plan'>({
    name: 'gateway_deprecated_requests_total',
    help: 'Requests to deprecated routes (410s after the sunset included), by route pattern and plan',
    labelNames: ['route', 'plan'],
    registers
  })
  const configReloads = new Counter<'result'>({
    name: 'gateway_config_reloads_total',
    help: 'Config reloads by result: success (new snapshot in force) or failure (last good config kept)',
    labelNames: ['result'],
    registers
  })

  const webhookDeliveries = new Counter<'event' | 'result'>({
    name: 'gateway_webhook_deliveries_total',
    help: 'Webhook delivery attempts by event type and result: success, failure (retried later) or dead (the last attempt failed: a dead letter)',
    labelNames: ['event', 'result'],
    registers
  })
  const webhookQueueDepth = new Gauge({
    name: 'gateway_webhook_queue_depth',
    help: 'Webhook deliveries waiting: queued, being attempted, or waiting for a retry (dead letters not included)',
    registers
  })

  let storeErrorsSeen = 0
  new Counter({
    name: 'gateway_store_errors_total',
    help: 'Limiter store errors (timeouts, connection errors) in this process',
    registers,
    collect () {
      const total = limiter()?.storeErrors() ?? storeErrorsSeen
      if (total > storeErrorsSeen) this.inc(total - storeErrorsSeen)
      storeErrorsSeen = Math.max(total, storeErrorsSeen)
    }
  })
  new Gauge({
    name: 'gateway_store_fallback_active',
    help: '1 while the limiter store circuit is open and its fallback policy is in force, else 0',
    registers,
    collect () { this.set(limiter()?.fallbackActive() === true ? 1 : 0) }
  })
  const outageSeen = { reserve: 0, allowance: 0 }
  new Counter<'kind'>({
    name: 'gateway_store_outage_admissions_total',
    help: 'Requests admitted while the limiter store did not answer (STORE_ON_ERROR=local or strict), by kind: ' +
      'reserve (room Redis kept back for this process) or allowance (the outage allowance, written back later)',
    labelNames: ['kind'],
    registers,
    collect () {
      const now = limiter()?.outageAdmissions?.()
      for (const kind of ['reserve', 'allowance'] as const) {
        const total = now?.[kind] ?? outageSeen[kind]
        this.inc({ kind }, Math.max(0, total - outageSeen[kind]))
        outageSeen[kind] = Math.max(total, outageSeen[kind])
      }
    }
  })
  new Gauge({
    name: 'gateway_banned_keys',
    help: 'Bans in force in the shared limiter store (all processes), counted in the background every 15 s ' +
      'and after each ban this process starts, lifts or resets; a scrape never reads the store',
    registers,
    collect () {
      // Before the first count, or while the store is unreachable, the last value stays.
      const status = limiter()
      const count = status === undefined ? 0 : status.bannedKeys()
      if (count !== undefined) this.set(count)
    }
  })

  const spans = opts.traceSpans ?? (() => undefined)
  let exportedSeen = 0
  new Counter({
    name: 'gateway_trace_spans_exported_total',
    help: 'Spans the tracing SDK exported to the OTLP collector (0 while tracing is off)',
    registers,
    collect () {
      const total = spans()?.exported ?? exportedSeen
      if (total > exportedSeen) this.inc(total - exportedSeen)
      exportedSeen = Math.max(total, exportedSeen)
    }
  })
  const droppedSeen: Record<string, number> = {}
  new Counter<'reason'>({
    name: 'gateway_trace_spans_dropped_total',
    help: 'Spans never exported, by reason: queue_full (OTEL_BSP_MAX_QUEUE_SIZE reached) or export_failed (collector down, slow or refusing)',
    labelNames: ['reason'],
    registers,
    collect () {
      const counts = spans()
      for (const reason of DROP_REASONS) {
        const seen = droppedSeen[reason] ?? 0
        const total = counts?.dropped[reason] ?? seen
        this.inc({ reason }, Math.max(0, total - seen))
        droppedSeen[reason] = Math.max(total, seen)
      }
    }
  })

  const shedSeen: Partial<Record<ShedReason, number>> = {}
  new Counter<'reason'>({
    name: 'gateway_shed_requests_total',
    help: 'Requests answered 503 unavailable to shed load, by reason: overload (the gateway over capacity), upstream_queue_full or upstream_budget (no backend connection within the upstream budget)',
    labelNames: ['reason'],
    registers,
    collect () {
      const now = opts.shedding?.shed() ?? {}
      for (const reason of SHED_REASONS) {
        const total = now[reason] ?? 0
        const seen = shedSeen[reason] ?? 0
        if (total > seen) this.inc({ reason }, total - seen)
        else this.inc({ reason }, 0)
        shedSeen[reason] = Math.max(total, seen)
      }
    }
  })
  new Gauge({
    name: 'gateway_in_flight_requests',
    help: 'Requests received by the public port and not yet answered',
    registers,
    collect () { this.set(opts.shedding?.concurrency()?.inFlight ?? 0) }
  })
  new Gauge({
    name: 'gateway_concurrency_limit',
    help: 'Requests in flight the gateway admits before shedding (adapted to keep its queueing delay — event loop, waiting for a backend connection — at SHED_QUEUE_DELAY_MS); 0 with load shedding off',
    registers,
    collect () { this.set(opts.shedding?.concurrency()?.limit ?? 0) }
  })
  new Gauge<'where'>({
    name: 'gateway_queue_delay_seconds',
    help: 'The queueing delay load shedding reads, over its last window: where="loop" the event loop\'s median delay, where="upstream" the standing wait for a backend connection (0 with load shedding off)',
    labelNames: ['where'],
    registers,
    collect () {
      const delays = opts.shedding?.queueDelays()
      this.set({ where: 'loop' }, (delays?.loop ?? 0) / 1000)
      this.set({ where: 'upstream' }, (delays?.upstream ?? 0) / 1000)
    }
  })
  new Gauge({
    name: 'gateway_upstream_in_flight',
    help: 'Requests holding a backend connection now',
    registers,
    collect () { this.set(opts.shedding?.upstream()?.inFlight ?? 0) }
  })
  new Gauge({
    name: 'gateway_upstream_queued',
    help: 'Requests waiting for a backend connection now (their wait counts against the upstream budget)',
    registers,
    collect () { this.set(opts.shedding?.upstream()?.queued ?? 0) }
  })
  let logLinesSeen = 0
  new Counter({
    name: 'gateway_log_lines_dropped_total',
    help: 'Log lines lost because their destination failed or did not keep up (a closed or unread pipe, a full disk): logging costs lines, never requests',
    registers,
    collect () {
      const total = opts.logLinesDropped?.() ?? 0
      this.inc(Math.max(0, total - logLinesSeen))
      logLinesSeen = Math.max(total, logLinesSeen)
    }
  })

  for (const op of operations) {
    for (const plan of plans) requests.count(op.path, op.method, plan, successStatus(op), 0)
    requestDuration.zero(op.path)
    upstreamDuration.zero(op.path)
  }
  requestDuration.zero(UNMATCHED_ROUTE)
  for (const plan of plans) {
    bans.inc({ plan }, 0)
    if (plan !== ANONYMOUS_PLAN) quotaOverage.inc({ plan }, 0)
    for (const window of REJECTION_WINDOWS) rateLimitRejections.inc({ plan, window }, 0)
    if (plan !== ANONYMOUS_PLAN) for (const window of WINDOWS) shadowRejections.inc({ plan, window }, 0)
    for (const route of opts.deprecatedRoutes ?? []) deprecatedRequests.inc({ route, plan }, 0)
  }
  for (const result of RELOAD_RESULTS) configReloads.inc({ result }, 0)
  for (const event of WEBHOOK_EVENT_TYPES) for (const result of WEBHOOK_RESULTS) webhookDeliveries.inc({ event, result }, 0)
  if (opts.keyExpiry !== undefined) registerKeyExpiryGauges(registry, opts.keyExpiry)
  registerQuotaGauges(registry, plans.filter((plan) => plan !== ANONYMOUS_PLAN), opts.quotaNearLimit ?? (() => undefined))

  return { registry, requests, requestDuration, upstreamDuration, rateLimitRejections, bans, shadowRejections, quotaOverage, deprecatedRequests, configReloads, webhookDeliveries, webhookQueueDepth }
}
