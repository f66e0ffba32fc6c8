// Every setting the gateway reads from the environment, typed. A default lives in the module it
// configures and is imported here; this module reads the environment and passes the values down.
// The rest of the gateway receives a GatewaySettings and never reads process.env itself.
import { parseAdminHosts } from '../admin/request-guard.js'
import { DEFAULT_CONFIG_DIR, DEFAULT_CONFIG_MAX_BYTES } from '../config/read-files.js'
import { DEFAULT_CONFIG_QUIET_MS } from '../config/watch.js'
import { DEFAULT_SHED_INTERVAL_MS } from '../edge/concurrency-limit.js'
import { DEFAULT_HEAD_TIMEOUT_MS, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_CLIENT, DEFAULT_PRESSURE_HEAD_TIMEOUT_MS } from '../edge/limits.js'
import { DEFAULT_SHED_QUEUE_DELAY_MS } from '../edge/load-shedding.js'
import { DEFAULT_PIPELINE_DEPTH, DEFAULT_PIPELINE_MAX_PARSED, MIN_PIPELINE_DEPTH } from '../edge/pipeline-gate.js'
import { DEFAULT_REDIS_SENTINEL_NAME } from '../redis/connection.js'
import { DEFAULT_OUTAGE_ALLOWANCE_PERCENT, DEFAULT_STORE_ON_ERROR, STORE_ON_ERROR_POLICIES, type StoreOnError } from '../limiter/redis/outage.js'
import { DEFAULT_ANONYMOUS_STATE_MAX } from '../limiter/memory/store.js'
import { DEFAULT_STORE_TIMEOUT_MS } from '../limiter/redis/store.js'
import { DEFAULT_RECOVERY_BARRIER_MS } from '../limiter/redis/shard.js'
import { DEFAULT_UPSTREAM_CONNECTIONS, DEFAULT_UPSTREAM_QUEUE_MAX } from '../proxy/upstream-gate.js'
import { DEFAULT_HISTORY_FLUSH_MS } from '../history/plugin.js'
import { DEFAULT_GATEWAY_SERVICE_NAME, DEFAULT_TRACE_INCOMING, TRACE_INCOMING_POLICIES, type TraceIncoming } from '../observability/tracing/plugin.js'
import { tracingSettingsFromEnv, type TracingSettings } from '../../shared/tracing/settings.js'

export const DEFAULT_GATEWAY_HOST = '0.0.0.0'
export const DEFAULT_GATEWAY_PORT = 8080
export const DEFAULT_ADMIN_HOST = '127.0.0.1'
export const DEFAULT_ADMIN_PORT = 9091
export const DEFAULT_BACKEND_URL = 'http://127.0.0.1:3001'
export const DEFAULT_LOG_LEVEL = 'info'
export const DEFAULT_LOG_BUFFER_BYTES = 4096
/** Log lines waiting for a pipe's reader (bytes) beyond which new lines are dropped and counted (observability/log-destination.ts). */
export const DEFAULT_LOG_BACKLOG_BYTES = 1024 * 1024
export const DEFAULT_BODY_LIMIT_BYTES = 16 * 1024
export const DEFAULT_UPSTREAM_TIMEOUT_MS = 10_000
export const MAX_UPSTREAM_CONNECTIONS = 4096
export const MAX_UPSTREAM_QUEUE = 1_000_000
export const MAX_SHED_QUEUE_DELAY_MS = 60_000
export const MAX_SHED_INTERVAL_MS = 60_000
export const MAX_HEAD_TIMEOUT_MS = 600_000
export const DEFAULT_SHUTDOWN_GRACE_MS = 10_000
/**
 * Readiness fails, and every response says `Connection: close`, this long before the listener stops
 * accepting: busy keep-alive connections end cleanly instead of racing the close (a request sent on
 * a connection the server is closing is lost). Raise it to the LB's health-check detection time.
 */
export const DEFAULT_SHUTDOWN_DRAIN_DELAY_MS = 1_000
/** Fastify's own default: a plugin that has not started in 10 s fails the start-up. */
export const DEFAULT_PLUGIN_TIMEOUT_MS = 10_000
/** Gateway processes (Node cluster workers) sharing the public port; >1 needs Redis (see workers.ts). */
export const DEFAULT_GATEWAY_WORKERS = 1
export const MAX_GATEWAY_WORKERS = 64

export interface GatewaySettings {
  readonly host: string
  readonly port: number
  readonly adminHost: string
  readonly adminPort: number
  readonly adminToken: string | undefined
  /** ADMIN_HOSTS: host names the admin app answers besides localhost and loopback addresses. */
  readonly adminHosts: readonly string[]
  readonly backendUrl: string
  readonly configDir: string
  /** Watch CONFIG_DIR and reload on change (SIGHUP and the admin API reload either way). */
  readonly configWatch: boolean
  /** CONFIG_MAX_BYTES: the largest config file accepted, per file. */
  readonly configMaxBytes: number
  /** CONFIG_QUIET_MS: a change in CONFIG_DIR is applied once the directory has been quiet this long. */
  readonly configQuietMs: number
  readonly redisUrl: string | undefined
  readonly redisClusterNodes: readonly string[] | undefined
  /** Sentinel seeds (`host:port`, comma-separated in REDIS_SENTINELS); REDIS_URL then only carries password/TLS. */
  readonly redisSentinels: readonly string[] | undefined
  readonly redisSentinelName: string
  /** STORE_TIMEOUT_MS: a Redis call unanswered this long fails its shard over to STORE_ON_ERROR (its late reply still counts). */
  readonly storeTimeoutMs: number
  /** STORE_RECOVERY_BARRIER_MS: after a Redis lost its data, no process grants there before this has passed. */
  readonly recoveryBarrierMs: number
  /** HISTORY_FLUSH_MS: how often usage history and shadow records are written (history/plugin.ts). */
  readonly historyFlushMs: number
  /**
   * STORE_ON_ERROR: `local` (each process's reserve, kept back in Redis, then the outage allowance), `strict` (the
   * reserve only: never over a limit), `open` (admit) or `closed` (503). Bounds: docs/limiter-internals.md.
   */
  readonly storeOnError: StoreOnError
  /** STORE_OUTAGE_ALLOWANCE_PERCENT (10): under `local`, the % of a consumer's minute limit all processes together may admit uncounted in an outage. */
  readonly storeOutageAllowancePercent: number
  /** STORE_PROCESSES (GATEWAY_WORKERS): gateway processes sharing the Redis; each admits the allowance ÷ this. */
  readonly storeProcesses: number
  readonly logLevel: string
  /** LOG_BUFFER_BYTES: log lines are batched up to this many bytes (flushed every 200 ms and on exit); 0 writes each line. */
  readonly logBufferBytes: number
  /** LOG_BACKLOG_BYTES: log lines waiting for a slow pipe reader, at most; beyond, lines are dropped (gateway_log_lines_dropped_total). */
  readonly logBacklogBytes: number
  /**
   * Fastify `trustProxy`: false, a hop count, or a comma-separated list of addresses/CIDRs. `true`
   * (trust every hop, i.e. the client's own leftmost X-Forwarded-For) is refused in production.
   */
  readonly trustProxy: boolean | number | string
  /** ANONYMOUS_STATE_MAX: anonymous clients a process keeps limiter state for. */
  readonly anonymousStateMax: number
  /** MAX_CONNECTIONS: open connections of the public listener (idle ones are closed first for new ones). */
  readonly maxConnections: number
  /** MAX_CONNECTIONS_PER_CLIENT: open connections of one client address or IPv6 prefix; 0: no cap. */
  readonly maxConnectionsPerClient: number
  /** HEAD_TIMEOUT_MS: a connection without a complete request head this long after it opened is closed; 0: off. */
  readonly headTimeoutMs: number
  /** PRESSURE_HEAD_TIMEOUT_MS: the same while unused connections (no complete head yet) hold 90 % of MAX_CONNECTIONS or more. */
  readonly pressureHeadTimeoutMs: number
  /** PIPELINE_DEPTH: a connection's requests parsed and unanswered at which the gateway stops reading it. */
  readonly pipelineDepth: number
  readonly bodyLimit: number
  /** UPSTREAM_TIMEOUT_MS: the upstream budget of a request, end to end (waiting for a connection included). */
  readonly upstreamTimeoutMs: number
  /** UPSTREAM_CONNECTIONS: connections to the backend, so requests in flight to it at most. */
  readonly upstreamConnections: number
  /** UPSTREAM_QUEUE_MAX: requests waiting for a backend connection at most (beyond: 503 at once). */
  readonly upstreamQueueMax: number
  /** SHED_QUEUE_DELAY_MS: the gateway's queueing delay (loop delay, standing wait for a backend connection) kept under overload by shedding load; 0 = no shedding. */
  readonly shedQueueDelayMs: number
  /** SHED_INTERVAL_MS: how long that delay must stay over target, with a queue in the gateway, before anything is shed. */
  readonly shedIntervalMs: number
  readonly shutdownGraceMs: number
  /** On SIGTERM, readiness fails (and responses close their connection) this long before the listener stops accepting. */
  readonly shutdownDrainDelayMs: number
  /** PLUGIN_TIMEOUT_MS: how long a plugin may take to start (the config reload plugin's first load runs in a worker thread). */
  readonly pluginTimeoutMs: number
  /** GATEWAY_WORKERS: processes sharing the public port (Node cluster); 1 = no cluster. */
  readonly workers: number
  readonly production: boolean
  /** PUBLIC_BASE_URL / STAGING_BASE_URL: public origins the OpenAPI document lists as servers. */
  readonly publicBaseUrl: string | undefined
  readonly stagingBaseUrl: string | undefined
  /** OTLP export (the standard OTEL_* variables); off without an endpoint. */
  readonly tracing: TracingSettings
  /** TRACE_INCOMING_CONTEXT: whether a client's `traceparent` is continued or the trace restarts at the edge. */
  readonly traceIncoming: TraceIncoming
}

type Env = Record<string, string | undefined>

function int (env: Env, name: string, fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(`${name}: expected an integer from ${min} to ${max}, got "${raw}"`)
  }
  return value
}

function str (env: Env, name: string, fallback: string): string {
  const raw = env[name]
  return raw === undefined || raw === '' ? fallback : raw
}

function oneOf<T extends string> (env: Env, name: string, fallback: T, allowed: readonly T[]): T {
  const raw = str(env, name, fallback)
  if (!(allowed as readonly string[]).includes(raw)) throw new Error(`${name}: expected one of ${allowed.join(', ')}, got "${raw}"`)
  return raw as T
}

function optional (env: Env, name: string): string | undefined {
  const raw = env[name]
  return raw === undefined || raw === '' ? undefined : raw
}

/** Why TRUST_PROXY=true is unsafe, and what to set instead: the refusal in production, the warning elsewhere. */
export const TRUST_PROXY_TRUE_PROBLEM = 'TRUST_PROXY=true trusts every X-Forwarded-For hop, so the client\'s own ' +
  'leftmost entry becomes its address (any client can pick its rate-limit identity); set TRUST_PROXY to the ' +
  'number of proxies in front of the gateway (e.g. TRUST_PROXY=1) or to their addresses/CIDRs ' +
  '(e.g. TRUST_PROXY=10.0.0.0/8)'

function trustProxy (raw: string | undefined, production: boolean): boolean | number | string {
  if (raw === undefined || raw === '' || raw === 'false') return false
  if (raw === 'true') {
    if (production) throw new Error(`${TRUST_PROXY_TRUE_PROBLEM}. Refused with NODE_ENV=production.`)
    return true
  }
  if (/^\d+$/.test(raw)) return Number(raw)
  return raw
}

export function settingsFromEnv (env: Env = process.env): GatewaySettings {
  const backendUrl = str(env, 'BACKEND_URL', DEFAULT_BACKEND_URL)
  if (!/^https?:\/\/[^/]+\/?$/.test(backendUrl)) {
    throw new Error(`BACKEND_URL: expected http(s)://host:port, got "${backendUrl}"`)
  }
  const cluster = optional(env, 'REDIS_CLUSTER_NODES')
  const production = env.NODE_ENV === 'production'
  return Object.freeze({
    host: str(env, 'GATEWAY_HOST', DEFAULT_GATEWAY_HOST),
    port: int(env, 'GATEWAY_PORT', DEFAULT_GATEWAY_PORT, 0, 65535),
    adminHost: str(env, 'ADMIN_HOST', DEFAULT_ADMIN_HOST),
    adminPort: int(env, 'ADMIN_PORT', DEFAULT_ADMIN_PORT, 0, 65535),
    adminToken: optional(env, 'ADMIN_TOKEN'),
    adminHosts: parseAdminHosts(optional(env, 'ADMIN_HOSTS')),
    backendUrl: backendUrl.replace(/\/$/, ''),
    configDir: str(env, 'CONFIG_DIR', DEFAULT_CONFIG_DIR),
    configWatch: env.CONFIG_WATCH !== 'false',
    configMaxBytes: int(env, 'CONFIG_MAX_BYTES', DEFAULT_CONFIG_MAX_BYTES, 1),
    configQuietMs: int(env, 'CONFIG_QUIET_MS', DEFAULT_CONFIG_QUIET_MS, 0, 600_000),
    redisUrl: optional(env, 'REDIS_URL'),
    redisClusterNodes: cluster?.split(',').map((s) => s.trim()).filter((s) => s !== ''),
    redisSentinels: optional(env, 'REDIS_SENTINELS')?.split(',').map((s) => s.trim()).filter((s) => s !== ''),
    redisSentinelName: str(env, 'REDIS_SENTINEL_NAME', DEFAULT_REDIS_SENTINEL_NAME),
    storeTimeoutMs: int(env, 'STORE_TIMEOUT_MS', DEFAULT_STORE_TIMEOUT_MS, 1, 60_000),
    recoveryBarrierMs: int(env, 'STORE_RECOVERY_BARRIER_MS', DEFAULT_RECOVERY_BARRIER_MS, 0, 60_000),
    historyFlushMs: int(env, 'HISTORY_FLUSH_MS', DEFAULT_HISTORY_FLUSH_MS, 100, 60_000),
    storeOnError: oneOf(env, 'STORE_ON_ERROR', DEFAULT_STORE_ON_ERROR, STORE_ON_ERROR_POLICIES),
    storeOutageAllowancePercent: int(env, 'STORE_OUTAGE_ALLOWANCE_PERCENT', DEFAULT_OUTAGE_ALLOWANCE_PERCENT, 0, 100),
    storeProcesses: int(env, 'STORE_PROCESSES', int(env, 'GATEWAY_WORKERS', DEFAULT_GATEWAY_WORKERS, 1, MAX_GATEWAY_WORKERS), 1, 10_000),
    logLevel: str(env, 'LOG_LEVEL', DEFAULT_LOG_LEVEL),
    logBufferBytes: int(env, 'LOG_BUFFER_BYTES', DEFAULT_LOG_BUFFER_BYTES, 0, 1_000_000),
    logBacklogBytes: int(env, 'LOG_BACKLOG_BYTES', DEFAULT_LOG_BACKLOG_BYTES, 0, 256 * 1024 * 1024),
    trustProxy: trustProxy(optional(env, 'TRUST_PROXY'), production),
    anonymousStateMax: int(env, 'ANONYMOUS_STATE_MAX', DEFAULT_ANONYMOUS_STATE_MAX, 1),
    maxConnections: int(env, 'MAX_CONNECTIONS', DEFAULT_MAX_CONNECTIONS, 1),
    maxConnectionsPerClient: int(env, 'MAX_CONNECTIONS_PER_CLIENT', DEFAULT_MAX_CONNECTIONS_PER_CLIENT, 0),
    headTimeoutMs: int(env, 'HEAD_TIMEOUT_MS', DEFAULT_HEAD_TIMEOUT_MS, 0, MAX_HEAD_TIMEOUT_MS),
    pressureHeadTimeoutMs: int(env, 'PRESSURE_HEAD_TIMEOUT_MS', DEFAULT_PRESSURE_HEAD_TIMEOUT_MS, 0, MAX_HEAD_TIMEOUT_MS),
    pipelineDepth: int(env, 'PIPELINE_DEPTH', DEFAULT_PIPELINE_DEPTH, MIN_PIPELINE_DEPTH, DEFAULT_PIPELINE_MAX_PARSED),
    bodyLimit: int(env, 'BODY_LIMIT_BYTES', DEFAULT_BODY_LIMIT_BYTES, 1),
    upstreamTimeoutMs: int(env, 'UPSTREAM_TIMEOUT_MS', DEFAULT_UPSTREAM_TIMEOUT_MS, 1),
    upstreamConnections: int(env, 'UPSTREAM_CONNECTIONS', DEFAULT_UPSTREAM_CONNECTIONS, 1, MAX_UPSTREAM_CONNECTIONS),
    upstreamQueueMax: int(env, 'UPSTREAM_QUEUE_MAX', DEFAULT_UPSTREAM_QUEUE_MAX, 0, MAX_UPSTREAM_QUEUE),
    shedQueueDelayMs: int(env, 'SHED_QUEUE_DELAY_MS', DEFAULT_SHED_QUEUE_DELAY_MS, 0, MAX_SHED_QUEUE_DELAY_MS),
    shedIntervalMs: int(env, 'SHED_INTERVAL_MS', DEFAULT_SHED_INTERVAL_MS, 0, MAX_SHED_INTERVAL_MS),
    shutdownGraceMs: int(env, 'SHUTDOWN_GRACE_MS', DEFAULT_SHUTDOWN_GRACE_MS, 0),
    shutdownDrainDelayMs: int(env, 'SHUTDOWN_DRAIN_DELAY_MS', DEFAULT_SHUTDOWN_DRAIN_DELAY_MS, 0),
    pluginTimeoutMs: int(env, 'PLUGIN_TIMEOUT_MS', DEFAULT_PLUGIN_TIMEOUT_MS, 1),
    workers: int(env, 'GATEWAY_WORKERS', DEFAULT_GATEWAY_WORKERS, 1, MAX_GATEWAY_WORKERS),
    production,
    publicBaseUrl: optional(env, 'PUBLIC_BASE_URL'),
    stagingBaseUrl: optional(env, 'STAGING_BASE_URL'),
    tracing: tracingSettingsFromEnv(env, DEFAULT_GATEWAY_SERVICE_NAME),
    traceIncoming: oneOf(env, 'TRACE_INCOMING_CONTEXT', DEFAULT_TRACE_INCOMING, TRACE_INCOMING_POLICIES)
  })
}
