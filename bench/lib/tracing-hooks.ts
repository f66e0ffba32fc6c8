// What tracing adds to one request, measured in isolation: the gateway's tracing hooks and the undici
// channel messages of one proxied request, called directly in a loop on request-shaped objects, with
// the real SDK (sampler, batch processor, OTLP exporter to the bench's collector, flushed before the
// clock stops). On a shared machine the per-request CPU of a whole gateway moves by more than the few
// per cent at stake from one round to the next; this part does not. Not counted here: the trace id's
// bytes in the log line and the `traceparent` header on the wire to the backend.
import { channel } from 'node:diagnostics_channel'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import Fastify from 'fastify'
import type { FastifyBaseLogger } from 'fastify'
import { destination, pino } from 'pino'
import { LazyChildLogger } from '../../src/gateway/observability/request-log.js'
import { logClientTraceId } from '../../src/gateway/observability/tracing/plugin.js'
import { createRequestSpans, type RequestSpanHooks } from '../../src/gateway/observability/tracing/request-spans.js'
import type { RateLimitDecision } from '../../src/gateway/limiter/decision.js'
import { createEdgeSampler } from '../../src/shared/tracing/edge-sampler.js'
import { startTracing } from '../../src/shared/tracing/sdk.js'
import { TraceIds } from '../../src/shared/tracing/trace-ids.js'
import { tracingSettingsFromEnv } from '../../src/shared/tracing/settings.js'
import { median } from './load.js'

export const DEFAULT_HOOK_ITERATIONS = 20_000
export const DEFAULT_HOOK_ROUNDS = 5
/** Requests between two flushes: few enough batches that a flush stays under the exporter's concurrency limit. */
const CHUNK = 1_000

const DECISION: RateLimitDecision = {
  allowed: true, outcome: 'ok', policy: 'enterprise', window: 'minute', limit: 1_000_000, remaining: 999_999, reset: 0,
  retryAfter: undefined, banStarted: false, resetIn: 60, policyField: '', rejectedBy: undefined, now: 0, shadowRejectedBy: undefined,
  source: 'store', cost: 1, overage: 0, overageUnits: 0
}
const create = channel('undici:request:create')
const sendHeaders = channel('undici:client:sendHeaders')
const headers = channel('undici:request:headers')
const trailers = channel('undici:request:trailers')
const SOCKET = {}
const noop = (): void => {}

/** A request as the gateway's hooks see it (the fields they read), fresh for each iteration. */
function fakeRequest (log: FastifyBaseLogger, i: number): FastifyRequest {
  return {
    id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    method: 'GET',
    url: '/v1/pets?limit=10',
    protocol: 'http',
    ip: '127.0.0.1',
    headers: { host: '127.0.0.1:8080', authorization: 'Bearer x', accept: '*/*' },
    log: new LazyChildLogger(log, { reqId: i }),
    routeUrl: '/v1/pets',
    consumer: { consumerId: 'bench', plan: 'enterprise' },
    rateLimit: null,
    trace: null
  } as unknown as FastifyRequest
}

/** The upstream request of the proxy, as undici hands it to the channels. */
function fakeUpstream (id: string): { origin: string, method: string, path: string, headers: string[], addHeader: (k: string, v: string) => void } {
  const upstream = {
    origin: 'http://127.0.0.1:3001',
    method: 'GET',
    path: '/v1/pets?limit=10',
    headers: ['host', '127.0.0.1:3001', 'accept', '*/*', 'x-request-id', id, 'x-consumer-id', 'bench', 'x-consumer-plan', 'enterprise'],
    addHeader (k: string, v: string) { upstream.headers.push(k, v) }
  }
  return upstream
}

function chunk (from: number, to: number, log: FastifyBaseLogger, hooks: RequestSpanHooks | undefined): void {
  const reply = { statusCode: 200 } as FastifyReply
  for (let i = from; i < to; i++) {
    const request = fakeRequest(log, i)
    if (hooks === undefined) {
      logClientTraceId(request, reply, noop)
      continue
    }
    hooks.startServerSpan(request, reply, noop)
    hooks.startLimiterSpan(request, reply, noop)
    request.rateLimit = DECISION
    hooks.endLimiterSpan(request, reply, noop)
    const upstream = fakeUpstream(request.id)
    // What the forwarder adds for a trace the sampler left out (src/gateway/proxy/forward.ts).
    const t = request.trace
    if (t?.sampled === false) upstream.headers.push('traceparent', t.traceparent)
    create.publish({ request: upstream })
    sendHeaders.publish({ request: upstream, headers: '', socket: SOCKET })
    headers.publish({ request: upstream, response: { statusCode: 200, headers: [], statusText: 'OK' } })
    trailers.publish({ request: upstream, trailers: [] })
    hooks.endServerSpan(request, reply, noop)
  }
}

/** µs of CPU for `iterations` requests, the export of their spans included. */
async function onePass (iterations: number, log: FastifyBaseLogger, hooks: RequestSpanHooks | undefined, flush: () => Promise<void>): Promise<number> {
  const started = process.cpuUsage()
  for (let from = 0; from < iterations; from += CHUNK) {
    chunk(from, Math.min(iterations, from + CHUNK), log, hooks)
    await flush()
  }
  const used = process.cpuUsage(started)
  return used.user + used.system
}

export interface HookCost { name: string, nsPerRequest: number, rounds: number[] }

/** ns of CPU per request for: tracing off, on at 1 %, on at 100 % (export included), each minus the loop's own cost. */
export async function tracingHookCost (collectorUrl: string, iterations = DEFAULT_HOOK_ITERATIONS, rounds = DEFAULT_HOOK_ROUNDS): Promise<HookCost[]> {
  const log: FastifyBaseLogger = pino({ level: 'info' }, destination({ dest: '/dev/null', sync: true }))
  const app: FastifyInstance = Fastify()
  app.decorate('limiter', { store: { describe: () => ({ kind: 'redis', nodes: [] }) } } as unknown as FastifyInstance['limiter'])
  app.decorate('limiterStatus', { storeErrors: () => 0, fallbackActive: () => false, bannedKeys: () => 0 })
  const configs: Array<{ name: string, ratio: string | undefined }> = [
    { name: 'tracing off (propagation only)', ratio: undefined },
    { name: 'tracing on, 0 % sampled (all unsampled)', ratio: '0' },
    { name: 'tracing on, 1 % sampled', ratio: '0.01' },
    { name: 'tracing on, 100 % sampled', ratio: '1' }
  ]
  const setups = await Promise.all(configs.map(async (c) => {
    if (c.ratio === undefined) return { ...c, hooks: undefined, flush: async () => {}, close: async () => {} }
    const settings = tracingSettingsFromEnv({
      OTEL_EXPORTER_OTLP_ENDPOINT: collectorUrl, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: c.ratio,
      OTEL_BSP_MAX_QUEUE_SIZE: String(CHUNK * 8)
    }, 'bench')
    // As the tracing plugin wires them (src/gateway/observability/tracing/plugin.ts).
    const ids = new TraceIds()
    const tracing = await startTracing(settings, log, { sampledBefore: ids })
    const hooks = createRequestSpans(app, tracing.tracer, 'continue', { sampler: createEdgeSampler(settings), ids })
    return { ...c, hooks, flush: async () => { await tracing.provider.forceFlush().catch(() => {}) }, close: async () => { hooks.upstream.close(); await tracing.shutdown() } }
  }))
  const harness = (): number => {
    const started = process.cpuUsage()
    for (let i = 0; i < iterations; i++) fakeUpstream(fakeRequest(log, i).id)
    const used = process.cpuUsage(started)
    return used.user + used.system
  }
  const results = new Map<string, number[]>(configs.map((c) => [c.name, []]))
  try {
    for (let round = 0; round < rounds; round++) {
      for (const s of round % 2 === 0 ? setups : [...setups].reverse()) {
        const loopUs = harness()
        const passUs = await onePass(iterations, log, s.hooks, s.flush)
        results.get(s.name)?.push(Math.max(0, (passUs - loopUs) * 1000 / iterations))
      }
    }
  } finally {
    await Promise.all(setups.map(async (s) => { await s.close() }))
    await app.close()
  }
  return configs.map((c) => {
    const ns = results.get(c.name) ?? []
    return { name: c.name, nsPerRequest: Math.round(median(ns)), rounds: ns.map(Math.round) }
  })
}
