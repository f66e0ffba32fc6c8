// The OpenTelemetry SDK of one service, built from TracingSettings: a tracer provider with
// parent-based sampling, a batch processor whose queue is bounded (a dead or slow collector costs
// dropped spans, counted, never memory or a request's time) and an OTLP/HTTP exporter (protobuf or
// JSON). Only ever loaded with `await import()` once tracing is on: with no endpoint configured, no
// module of the SDK is loaded at all. Nothing is registered globally here — each service decides
// what it needs (the gateway passes contexts explicitly; the backend registers a context manager).
import { randomUUID } from 'node:crypto'
import { createNoopMeter, diag, DiagLogLevel, type Counter, type DiagLogger, type Meter, type MeterProvider, type MetricAttributes, type Tracer } from '@opentelemetry/api'
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources'
import {
  AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider,
  type IdGenerator, type Sampler, type SpanExporter
} from '@opentelemetry/sdk-trace'
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions'
import type { TracingSettings } from './settings.js'
import { emptySpanCounts, type SpanCounts } from './span-counts.js'

/** Attribute values longer than this are cut (a URL path can be long; the queue's memory stays bounded). */
export const DEFAULT_ATTRIBUTE_VALUE_LENGTH_LIMIT = 512
/** Closing waits this long at most for the last spans to leave (a dead collector must not hold a shutdown). */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 2_000
/** The SDK's own warnings (failed exports) reach the log at most once per interval, with a count. */
export const DEFAULT_DIAG_LOG_INTERVAL_MS = 60_000
/** The batch processor's self-observability counter (error.type `queue_full`, or the export error). */
const PROCESSED_SPANS = 'otel.sdk.processor.span.processed'
const SERVICE_INSTANCE_ID = 'service.instance.id'
const SERVICE_VERSION = '0.1.0'

export interface WarnLogger {
  warn: (obj: object, msg: string) => void
}

export interface Tracing {
  readonly provider: TracerProvider
  readonly tracer: Tracer
  readonly settings: TracingSettings
  /** Spans exported and dropped since start. */
  readonly counts: SpanCounts
  /** Flushes what it can within DEFAULT_SHUTDOWN_TIMEOUT_MS, then stops exporting. */
  shutdown: () => Promise<void>
}

function sampler (settings: TracingSettings): Sampler {
  const ratio = new TraceIdRatioBasedSampler(settings.samplerRatio)
  switch (settings.sampler) {
    case 'always_on': return new AlwaysOnSampler()
    case 'always_off': return new AlwaysOffSampler()
    case 'traceidratio': return ratio
    case 'parentbased_always_off': return new ParentBasedSampler({ root: new AlwaysOffSampler() })
    case 'parentbased_traceidratio': return new ParentBasedSampler({ root: ratio })
    case 'parentbased_always_on': return new ParentBasedSampler({ root: new AlwaysOnSampler() })
  }
}

async function exporter (settings: TracingSettings): Promise<SpanExporter> {
  const config = { url: settings.tracesUrl, timeoutMillis: settings.timeoutMs }
  if (settings.protocol === 'http/json') {
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http')
    return new OTLPTraceExporter(config)
  }
  const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-proto')
  return new OTLPTraceExporter(config)
}

/**
 * The batch processor reports what became of every span it was handed on one counter (its
 * self-observability metrics); this meter provider turns that counter into plain numbers, which the
 * gateway exposes as Prometheus counters. Every other instrument is a no-op.
 */
function countingMeterProvider (counts: SpanCounts): MeterProvider {
  const noop = createNoopMeter()
  const processed: Counter = {
    add (value: number, attributes?: MetricAttributes) {
      const error = attributes?.['error.type']
      if (error === undefined) counts.exported += value
      else counts.dropped[error === 'queue_full' ? 'queue_full' : 'export_failed'] += value
    }
  }
  const meter: Meter = {
    createCounter: <A extends MetricAttributes>(name: string) => (name === PROCESSED_SPANS ? processed : noop.createCounter<A>(name)) as Counter<A>,
    createGauge: (name) => noop.createGauge(name),
    createHistogram: (name) => noop.createHistogram(name),
    createUpDownCounter: (name) => noop.createUpDownCounter(name),
    createObservableGauge: (name) => noop.createObservableGauge(name),
    createObservableCounter: (name) => noop.createObservableCounter(name),
    createObservableUpDownCounter: (name) => noop.createObservableUpDownCounter(name),
    addBatchObservableCallback: () => {},
    removeBatchObservableCallback: () => {}
  }
  return { getMeter: () => meter }
}

let diagInstalled = false

/** The SDK's diagnostics (one per failed export while a collector is down) into the service's log, throttled. */
function installDiagLogger (log: WarnLogger): void {
  if (diagInstalled) return
  diagInstalled = true
  let lastAt = -Infinity
  let suppressed = 0
  const write = (level: string) => (message: string, ...args: unknown[]): void => {
    const now = Date.now()
    if (now - lastAt < DEFAULT_DIAG_LOG_INTERVAL_MS) { suppressed++; return }
    lastAt = now
    const detail = args.map((a) => a instanceof Error ? a.message : String(a)).join(' ')
    log.warn({ otel: level, detail: detail === '' ? undefined : detail, suppressedSinceLast: suppressed }, `tracing: ${message}`)
    suppressed = 0
  }
  const ignore = (): void => {}
  const logger: DiagLogger = { error: write('error'), warn: write('warn'), info: ignore, debug: ignore, verbose: ignore }
  diag.setLogger(logger, { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true })
}

export interface TracingOptions {
  /**
   * The service decides sampling itself before asking for a span (the gateway, at its edge:
   * edge-sampler.ts), and hands the SDK the trace id it decided on: the SDK then records every span
   * it is asked for (AlwaysOn) and takes its ids from here.
   */
  readonly sampledBefore?: IdGenerator
}

export async function startTracing (settings: TracingSettings, log: WarnLogger, options: TracingOptions = {}): Promise<Tracing> {
  if (settings.tracesUrl === undefined) throw new Error('startTracing: no OTLP endpoint in the settings')
  installDiagLogger(log)
  const counts = emptySpanCounts()
  const resource = defaultResource()
    .merge(resourceFromAttributes({
      [ATTR_SERVICE_NAME]: settings.serviceName,
      [ATTR_SERVICE_VERSION]: SERVICE_VERSION,
      [SERVICE_INSTANCE_ID]: randomUUID()
    }))
    // OTEL_RESOURCE_ATTRIBUTES (and OTEL_SERVICE_NAME again) as the SDK reads them.
    .merge(detectResources({ detectors: [envDetector] }))
  const processor = new BatchSpanProcessor({
    exporter: await exporter(settings),
    maxQueueSize: settings.maxQueueSize,
    maxExportBatchSize: settings.maxExportBatchSize,
    scheduledDelayMillis: settings.scheduledDelayMs,
    exportTimeoutMillis: settings.exportTimeoutMs,
    selfObsMeterProvider: countingMeterProvider(counts)
  })
  const provider = new TracerProvider({
    resource,
    sampler: options.sampledBefore === undefined ? sampler(settings) : new AlwaysOnSampler(),
    ...options.sampledBefore === undefined ? {} : { idGenerator: options.sampledBefore },
    spanProcessors: [processor],
    spanLimits: { attributeValueLengthLimit: DEFAULT_ATTRIBUTE_VALUE_LENGTH_LIMIT }
  })
  let closing: Promise<void> | undefined
  return {
    provider,
    tracer: provider.getTracer(settings.serviceName, SERVICE_VERSION),
    settings,
    counts,
    shutdown: async () => {
      closing ??= new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, DEFAULT_SHUTDOWN_TIMEOUT_MS)
        timer.unref()
        provider.shutdown().catch(() => {}).finally(() => { clearTimeout(timer); resolve() })
      })
      await closing
    }
  }
}
