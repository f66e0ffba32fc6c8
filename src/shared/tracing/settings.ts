// Tracing settings of both services, from the standard OpenTelemetry variables read as the
// OpenTelemetry SDK reads them (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/),
// but parsed once here and checked like every other setting: a typo stops the process instead of
// silently exporting nothing. Off unless an OTLP endpoint is set — then the SDK is not even loaded.
// Secrets stay out: OTEL_EXPORTER_OTLP_HEADERS (a collector's token) is read by the exporter itself
// and never passes through here, so it cannot reach a log line.

export const OTLP_PROTOCOLS = ['http/protobuf', 'http/json'] as const
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number]
export const DEFAULT_OTLP_PROTOCOL: OtlpProtocol = 'http/protobuf'
export const TRACES_SAMPLERS = ['parentbased_traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'traceidratio', 'always_on', 'always_off'] as const
export type TracesSampler = (typeof TRACES_SAMPLERS)[number]
/** The specification's default; `parentbased_traceidratio` with OTEL_TRACES_SAMPLER_ARG=1 is the same. */
export const DEFAULT_TRACES_SAMPLER: TracesSampler = 'parentbased_always_on'
export const DEFAULT_SAMPLER_RATIO = 1
/** Ended spans waiting for export; beyond it spans are dropped (and counted), never buffered. */
export const DEFAULT_BSP_MAX_QUEUE_SIZE = 2048
export const DEFAULT_BSP_MAX_EXPORT_BATCH_SIZE = 512
export const DEFAULT_BSP_SCHEDULE_DELAY_MS = 5_000
export const DEFAULT_BSP_EXPORT_TIMEOUT_MS = 30_000
/** One OTLP request (retries included) gives up after this long. */
export const DEFAULT_OTLP_TIMEOUT_MS = 10_000
const TRACES_PATH = 'v1/traces'

export interface TracingSettings {
  /** Where spans are sent (OTLP/HTTP); undefined: tracing off, nothing of the SDK is loaded. */
  readonly tracesUrl: string | undefined
  readonly protocol: OtlpProtocol
  readonly serviceName: string
  readonly sampler: TracesSampler
  /** The ratio of the `*traceidratio` samplers, 0–1. */
  readonly samplerRatio: number
  readonly maxQueueSize: number
  readonly maxExportBatchSize: number
  readonly scheduledDelayMs: number
  readonly exportTimeoutMs: number
  /** Budget of one OTLP request to the collector. */
  readonly timeoutMs: number
}

type Env = Record<string, string | undefined>

function value (env: Env, name: string): string | undefined {
  const raw = env[name]?.trim()
  return raw === undefined || raw === '' ? undefined : raw
}

function int (env: Env, name: string, fallback: number, min: number): number {
  const raw = value(env, name)
  if (raw === undefined) return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n < min) throw new Error(`${name}: expected an integer ≥ ${min}, got "${raw}"`)
  return n
}

function oneOf<T extends string> (raw: string | undefined, name: string, fallback: T, allowed: readonly T[]): T {
  if (raw === undefined) return fallback
  if (!(allowed as readonly string[]).includes(raw)) throw new Error(`${name}: expected one of ${allowed.join(', ')}, got "${raw}"`)
  return raw as T
}

function httpUrl (raw: string, name: string): string {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new Error(`${name}: expected an http(s) URL, got "${raw}"`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`${name}: expected an http(s) URL (OTLP over HTTP), got "${raw}"`)
  return raw
}

/** The traces URL the SDK would use: the per-signal endpoint as given, or the base endpoint + `/v1/traces`. */
function tracesUrl (env: Env): string | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined
  const exporters = (value(env, 'OTEL_TRACES_EXPORTER') ?? 'otlp').split(',').map((s) => s.trim())
  if (exporters.includes('none')) return undefined
  for (const exporter of exporters) {
    if (exporter !== 'otlp') throw new Error(`OTEL_TRACES_EXPORTER: only "otlp" (or "none") is supported, got "${exporter}"`)
  }
  const signal = value(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT')
  if (signal !== undefined) return httpUrl(signal, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT')
  const base = value(env, 'OTEL_EXPORTER_OTLP_ENDPOINT')
  if (base === undefined) return undefined
  httpUrl(base, 'OTEL_EXPORTER_OTLP_ENDPOINT')
  return `${base.endsWith('/') ? base : `${base}/`}${TRACES_PATH}`
}

function ratio (env: Env, sampler: TracesSampler): number {
  const raw = value(env, 'OTEL_TRACES_SAMPLER_ARG')
  if (raw === undefined || !sampler.endsWith('traceidratio')) return DEFAULT_SAMPLER_RATIO
  const n = Number(raw)
  if (!Number.isFinite(n) || n < 0 || n > 1) throw new Error(`OTEL_TRACES_SAMPLER_ARG: expected a ratio from 0 to 1, got "${raw}"`)
  return n
}

export function tracingSettingsFromEnv (env: Env, defaultServiceName: string): TracingSettings {
  const protocol = value(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ?? value(env, 'OTEL_EXPORTER_OTLP_PROTOCOL')
  if (protocol === 'grpc') throw new Error('OTEL_EXPORTER_OTLP_PROTOCOL: grpc is not supported; use http/protobuf or http/json (the collector\'s OTLP/HTTP port, 4318)')
  const sampler = oneOf(value(env, 'OTEL_TRACES_SAMPLER'), 'OTEL_TRACES_SAMPLER', DEFAULT_TRACES_SAMPLER, TRACES_SAMPLERS)
  const maxQueueSize = int(env, 'OTEL_BSP_MAX_QUEUE_SIZE', DEFAULT_BSP_MAX_QUEUE_SIZE, 1)
  return Object.freeze({
    tracesUrl: tracesUrl(env),
    protocol: oneOf(protocol, 'OTEL_EXPORTER_OTLP_PROTOCOL', DEFAULT_OTLP_PROTOCOL, OTLP_PROTOCOLS),
    serviceName: value(env, 'OTEL_SERVICE_NAME') ?? defaultServiceName,
    sampler,
    samplerRatio: ratio(env, sampler),
    maxQueueSize,
    maxExportBatchSize: Math.min(maxQueueSize, int(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', DEFAULT_BSP_MAX_EXPORT_BATCH_SIZE, 1)),
    scheduledDelayMs: int(env, 'OTEL_BSP_SCHEDULE_DELAY', DEFAULT_BSP_SCHEDULE_DELAY_MS, 0),
    exportTimeoutMs: int(env, 'OTEL_BSP_EXPORT_TIMEOUT', DEFAULT_BSP_EXPORT_TIMEOUT_MS, 1),
    timeoutMs: int(env, 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT', int(env, 'OTEL_EXPORTER_OTLP_TIMEOUT', DEFAULT_OTLP_TIMEOUT_MS, 1), 1)
  })
}
