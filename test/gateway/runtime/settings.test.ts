import t from 'tap'
import { settingsFromEnv } from '../../../src/gateway/runtime/settings.js'
import { tracingSettingsFromEnv } from '../../../src/shared/tracing/settings.js'

t.test('defaults follow docs/decisions.md §8', async (t) => {
  t.same(settingsFromEnv({}), {
    host: '0.0.0.0',
    port: 8080,
    adminHost: '127.0.0.1',
    adminPort: 9091,
    adminToken: undefined,
    adminHosts: [],
    backendUrl: 'http://127.0.0.1:3001',
    configDir: './config',
    configWatch: true,
    configMaxBytes: 33554432,
    configQuietMs: 2000,
    redisUrl: undefined,
    redisClusterNodes: undefined,
    redisSentinels: undefined,
    redisSentinelName: 'mymaster',
    storeTimeoutMs: 250,
    recoveryBarrierMs: 2000,
    historyFlushMs: 5000,
    storeOnError: 'local',
    storeOutageAllowancePercent: 10,
    storeProcesses: 1,
    logLevel: 'info',
    logBufferBytes: 4096,
    logBacklogBytes: 1024 * 1024,
    pluginTimeoutMs: 10000,
    trustProxy: false,
    anonymousStateMax: 100000,
    maxConnections: 10000,
    maxConnectionsPerClient: 1024,
    headTimeoutMs: 5000,
    pressureHeadTimeoutMs: 1000,
    pipelineDepth: 4,
    bodyLimit: 16384,
    upstreamTimeoutMs: 10000,
    upstreamConnections: 64,
    upstreamQueueMax: 1024,
    shedQueueDelayMs: 10,
    shedIntervalMs: 500,
    shutdownGraceMs: 10000,
    shutdownDrainDelayMs: 1000,
    workers: 1,
    production: false,
    publicBaseUrl: undefined,
    stagingBaseUrl: undefined,
    tracing: tracingSettingsFromEnv({}, 'petstore-gateway'),
    traceIncoming: 'continue'
  })
  t.equal(settingsFromEnv({}).tracing.tracesUrl, undefined, 'tracing off')
})

t.test('values from the environment are parsed and checked', async (t) => {
  const s = settingsFromEnv({
    GATEWAY_PORT: '8081', REDIS_CLUSTER_NODES: '127.0.0.1:7000, 127.0.0.1:7001,', TRUST_PROXY: '2',
    BACKEND_URL: 'http://backend:3001/', NODE_ENV: 'production', ADMIN_TOKEN: 'tok'
  })
  t.equal(s.port, 8081)
  t.same(s.redisClusterNodes, ['127.0.0.1:7000', '127.0.0.1:7001'])
  t.equal(s.trustProxy, 2)
  t.equal(s.backendUrl, 'http://backend:3001')
  t.equal(s.production, true)
  t.equal(s.adminToken, 'tok')
  t.same([settingsFromEnv({ PUBLIC_BASE_URL: 'https://api.example', STAGING_BASE_URL: 'https://staging.example' })].map((x) => [x.publicBaseUrl, x.stagingBaseUrl]), [['https://api.example', 'https://staging.example']])
  t.equal(settingsFromEnv({ TRUST_PROXY: 'true' }).trustProxy, true)
  t.equal(settingsFromEnv({ TRUST_PROXY: '10.0.0.0/8,127.0.0.1' }).trustProxy, '10.0.0.0/8,127.0.0.1')
  t.throws(() => settingsFromEnv({ GATEWAY_PORT: '70000' }), { message: 'GATEWAY_PORT: expected an integer from 0 to 65535, got "70000"' })
  t.same([settingsFromEnv({ STORE_TIMEOUT_MS: '20', STORE_ON_ERROR: 'closed' })].map((x) => [x.storeTimeoutMs, x.storeOnError]), [[20, 'closed']])
  t.equal(settingsFromEnv({ STORE_RECOVERY_BARRIER_MS: '500' }).recoveryBarrierMs, 500)
  t.same([settingsFromEnv({ STORE_ON_ERROR: 'strict', STORE_OUTAGE_ALLOWANCE_PERCENT: '5', GATEWAY_WORKERS: '4' })].map((x) => [x.storeOnError, x.storeOutageAllowancePercent, x.storeProcesses]), [['strict', 5, 4]], 'STORE_PROCESSES defaults to GATEWAY_WORKERS')
  t.equal(settingsFromEnv({ GATEWAY_WORKERS: '4', STORE_PROCESSES: '6' }).storeProcesses, 6)
  t.throws(() => settingsFromEnv({ STORE_OUTAGE_ALLOWANCE_PERCENT: '101' }), /STORE_OUTAGE_ALLOWANCE_PERCENT/)
  t.throws(() => settingsFromEnv({ STORE_RECOVERY_BARRIER_MS: '60001' }), /STORE_RECOVERY_BARRIER_MS/)
  t.same([settingsFromEnv({ UPSTREAM_CONNECTIONS: '8', UPSTREAM_QUEUE_MAX: '0' })].map((x) => [x.upstreamConnections, x.upstreamQueueMax]), [[8, 0]])
  t.equal(settingsFromEnv({ SHED_QUEUE_DELAY_MS: '0' }).shedQueueDelayMs, 0)
  t.same([settingsFromEnv({ SHED_INTERVAL_MS: '250', HEAD_TIMEOUT_MS: '0', PRESSURE_HEAD_TIMEOUT_MS: '300', PIPELINE_DEPTH: '2' })]
    .map((x) => [x.shedIntervalMs, x.headTimeoutMs, x.pressureHeadTimeoutMs, x.pipelineDepth]), [[250, 0, 300, 2]])
  t.throws(() => settingsFromEnv({ PIPELINE_DEPTH: '1' }), { message: 'PIPELINE_DEPTH: expected an integer from 2 to 64, got "1"' })
  t.throws(() => settingsFromEnv({ UPSTREAM_CONNECTIONS: '0' }), { message: 'UPSTREAM_CONNECTIONS: expected an integer from 1 to 4096, got "0"' })
  t.equal(settingsFromEnv({ HISTORY_FLUSH_MS: '250' }).historyFlushMs, 250)
  t.throws(() => settingsFromEnv({ STORE_ON_ERROR: 'fail-open' }), { message: 'STORE_ON_ERROR: expected one of local, strict, open, closed, got "fail-open"' })
  t.throws(() => settingsFromEnv({ BACKEND_URL: 'ftp://x' }), { message: 'BACKEND_URL: expected http(s)://host:port, got "ftp://x"' })
  t.same([settingsFromEnv({ MAX_CONNECTIONS: '500', MAX_CONNECTIONS_PER_CLIENT: '0' })].map((x) => [x.maxConnections, x.maxConnectionsPerClient]), [[500, 0]],
    'MAX_CONNECTIONS_PER_CLIENT=0 turns the per-client cap off')
  t.throws(() => settingsFromEnv({ MAX_CONNECTIONS: '0' }), { message: /^MAX_CONNECTIONS: expected an integer from 1/ })
  t.equal(settingsFromEnv({ TRACE_INCOMING_CONTEXT: 'restart' }).traceIncoming, 'restart')
  t.throws(() => settingsFromEnv({ TRACE_INCOMING_CONTEXT: 'trust' }), { message: 'TRACE_INCOMING_CONTEXT: expected one of continue, restart, got "trust"' })
  t.equal(settingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).tracing.tracesUrl, 'http://collector:4318/v1/traces')
})
