import t from 'tap'
import {
  DEFAULT_BSP_EXPORT_TIMEOUT_MS, DEFAULT_BSP_MAX_EXPORT_BATCH_SIZE, DEFAULT_BSP_MAX_QUEUE_SIZE, DEFAULT_BSP_SCHEDULE_DELAY_MS,
  DEFAULT_OTLP_TIMEOUT_MS, tracingSettingsFromEnv
} from '../../../src/shared/tracing/settings.js'

t.test('off by default: no endpoint, no traces URL', async (t) => {
  t.same(tracingSettingsFromEnv({}, 'petstore-gateway'), {
    tracesUrl: undefined,
    protocol: 'http/protobuf',
    serviceName: 'petstore-gateway',
    sampler: 'parentbased_always_on',
    samplerRatio: 1,
    maxQueueSize: DEFAULT_BSP_MAX_QUEUE_SIZE,
    maxExportBatchSize: DEFAULT_BSP_MAX_EXPORT_BATCH_SIZE,
    scheduledDelayMs: DEFAULT_BSP_SCHEDULE_DELAY_MS,
    exportTimeoutMs: DEFAULT_BSP_EXPORT_TIMEOUT_MS,
    timeoutMs: DEFAULT_OTLP_TIMEOUT_MS
  })
})

t.test('the endpoint variables as the SDK reads them', async (t) => {
  const url = (env: Record<string, string>): string | undefined => tracingSettingsFromEnv(env, 'x').tracesUrl
  t.equal(url({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }), 'http://collector:4318/v1/traces', 'base endpoint + /v1/traces')
  t.equal(url({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }), 'http://collector:4318/v1/traces')
  t.equal(url({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/otlp' }), 'http://collector:4318/otlp/v1/traces')
  t.equal(url({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://b/custom' }), 'https://b/custom', 'the per-signal endpoint is used as it is, and wins')
  t.equal(url({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_TRACES_EXPORTER: 'none' }), undefined, 'OTEL_TRACES_EXPORTER=none turns it off')
  t.equal(url({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_SDK_DISABLED: 'true' }), undefined, 'OTEL_SDK_DISABLED=true turns it off')
  t.equal(url({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_SDK_DISABLED: 'false' }), 'http://a:4318/v1/traces')
  t.equal(url({ OTEL_EXPORTER_OTLP_ENDPOINT: '  ' }), undefined, 'blank is unset')
})

t.test('service name, sampler, protocol and the batch processor bounds', async (t) => {
  const s = tracingSettingsFromEnv({
    OTEL_SERVICE_NAME: 'gw-eu', OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_BSP_MAX_QUEUE_SIZE: '100', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '500',
    OTEL_BSP_SCHEDULE_DELAY: '0', OTEL_BSP_EXPORT_TIMEOUT: '1000', OTEL_EXPORTER_OTLP_TIMEOUT: '2000'
  }, 'petstore-gateway')
  t.equal(s.serviceName, 'gw-eu')
  t.equal(s.sampler, 'parentbased_traceidratio')
  t.equal(s.samplerRatio, 0.01)
  t.equal(s.protocol, 'http/json')
  t.equal(s.maxQueueSize, 100)
  t.equal(s.maxExportBatchSize, 100, 'a batch never exceeds the queue')
  t.equal(s.scheduledDelayMs, 0)
  t.equal(s.exportTimeoutMs, 1000)
  t.equal(s.timeoutMs, 2000)
  t.equal(tracingSettingsFromEnv({ OTEL_EXPORTER_OTLP_TIMEOUT: '2000', OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '300' }, 'x').timeoutMs, 300, 'per-signal timeout wins')
  t.equal(tracingSettingsFromEnv({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' }, 'x').protocol, 'http/protobuf', 'per-signal protocol wins')
  t.equal(tracingSettingsFromEnv({ OTEL_TRACES_SAMPLER: 'always_on', OTEL_TRACES_SAMPLER_ARG: '0.5' }, 'x').samplerRatio, 1, 'the ratio only applies to ratio samplers')
})

t.test('a value the SDK would ignore stops the process with the variable named', async (t) => {
  const problems: Array<[Record<string, string>, string]> = [
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, 'OTEL_EXPORTER_OTLP_PROTOCOL: grpc is not supported; use http/protobuf or http/json (the collector\'s OTLP/HTTP port, 4318)'],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'thrift' }, 'OTEL_EXPORTER_OTLP_PROTOCOL: expected one of http/protobuf, http/json, got "thrift"'],
    [{ OTEL_TRACES_SAMPLER: 'sometimes' }, 'OTEL_TRACES_SAMPLER: expected one of parentbased_traceidratio, parentbased_always_on, parentbased_always_off, traceidratio, always_on, always_off, got "sometimes"'],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '5' }, 'OTEL_TRACES_SAMPLER_ARG: expected a ratio from 0 to 1, got "5"'],
    [{ OTEL_TRACES_EXPORTER: 'zipkin' }, 'OTEL_TRACES_EXPORTER: only "otlp" (or "none") is supported, got "zipkin"'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, 'OTEL_EXPORTER_OTLP_ENDPOINT: expected an http(s) URL (OTLP over HTTP), got "collector:4318"'],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'not a url' }, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: expected an http(s) URL, got "not a url"'],
    [{ OTEL_BSP_MAX_QUEUE_SIZE: '0' }, 'OTEL_BSP_MAX_QUEUE_SIZE: expected an integer ≥ 1, got "0"']
  ]
  for (const [env, message] of problems) t.throws(() => tracingSettingsFromEnv(env, 'x'), { message }, JSON.stringify(env))
})
