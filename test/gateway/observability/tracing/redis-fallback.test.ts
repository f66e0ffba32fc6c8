// The limiter's span when Redis stops answering, against a real redis-server frozen with SIGSTOP: the
// timed-out Redis call is visible as the span's length, decisions answered by STORE_ON_ERROR=local
// once the shard is down say `fallback`, under `closed` the 503 is the span's error, and a busy
// consumer's admissions from a block Redis counted for it say `grant`.
import t from 'tap'
import { startBackend } from '../../../helpers/backend.js'
import { startGateway } from '../../../helpers/gateway.js'
import { bearer, DEMO_KEYS } from '../../../helpers/config-fixture.js'
import { STATUS_ERROR, startOtlpReceiver } from '../../../helpers/otlp-receiver.js'
import { poll, sleep } from '../../../helpers/poll.js'
import { startRedis } from '../../../helpers/redis.js'
import { IDLE_MS } from '../../../../src/gateway/limiter/redis/calls.js'
import { theSpan, traceSpans, tracingTo } from '../../../helpers/tracing.js'

const STORE_TIMEOUT_MS = 50
/** Between requests once the consumer has a reserve: over a second (below HOT_RATE), under IDLE_MS (still seen). */
const SLOW_GAP_MS = 1_200
const GATEWAY = 'petstore-gateway'
const PARENT_SPAN = '7'.repeat(16)

function traceOf (n: number): string {
  return n.toString(16).padStart(32, 'a')
}

async function get (url: string, trace: string): Promise<{ status: number, ms: number }> {
  const started = performance.now()
  const res = await fetch(`${url}/v1/pets?limit=1`, { headers: { ...bearer(DEMO_KEYS.business), traceparent: `00-${trace}-${PARENT_SPAN}-01` } })
  await res.arrayBuffer()
  return { status: res.status, ms: performance.now() - started }
}

function msOf (span: { startNs: bigint, endNs: bigint }): number {
  return Number(span.endNs - span.startNs) / 1e6
}

t.test('local: Redis frozen — the timed-out call shows in the limiter span, then decisions say fallback', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const redis = await startRedis(t)
  const backend = await startBackend(t)
  const gw = await startGateway(t, {
    backendUrl: backend.url,
    limiter: { settings: { redisUrl: redis.url, storeOnError: 'local', storeTimeoutMs: STORE_TIMEOUT_MS} },
    tracing: { settings: tracingTo(receiver.url, GATEWAY) }
  })
  // Registered after the gateway's close, so it runs first: closing the gateway sends Redis a QUIT.
  t.teardown(() => redis.signal('SIGCONT'))
  t.equal((await get(gw.url, traceOf(1))).status, 200)
  const healthy = theSpan(await traceSpans(receiver, traceOf(1), 4), traceOf(1), GATEWAY, 'rate limit')
  t.equal(healthy.attributes['petstore.ratelimit.store'], 'redis')
  t.equal(healthy.attributes['petstore.ratelimit.source'], 'store', 'decided by its own call to Redis')

  // Busy for two seconds running: the consumer holds a reserve Redis keeps back for this process.
  for (let n = 0; n < 44; n++) {
    t.equal((await get(gw.url, traceOf(10_000 + n))).status, 200)
    await sleep(50)
  }
  // Then one request every SLOW_GAP_MS (more than a second, less than IDLE_MS): no longer busy (HOT_RATE), so no
  // block and no give-back at a second's end; still seen, so the reserve is kept. Before the freeze, every call for
  // the consumer is over (each came with its request, one after the other) and the block of the last busy second was
  // given back seconds ago: the request after the freeze sends its own call, so its limiter span holds the whole
  // budget. (A request that came while a give-back was out found the shard down when that call timed out, its span
  // the part of the budget left: 45.1 ms of 50 in one loaded run.)
  t.ok(SLOW_GAP_MS > 1_000 && SLOW_GAP_MS < IDLE_MS, `${SLOW_GAP_MS} ms apart: one request a second at most, seen within ${IDLE_MS} ms`)
  for (let n = 0; n < 3; n++) {
    await sleep(SLOW_GAP_MS)
    t.equal((await get(gw.url, traceOf(20_000 + n))).status, 200)
  }
  await sleep(SLOW_GAP_MS)
  redis.signal('SIGSTOP')
  // The next request sends its own call, which waits out its budget; the shard is then down.
  let n = 2
  const opened = await poll(async () => {
    t.equal((await get(gw.url, traceOf(n++))).status, 200)
    return gw.app.limiterStatus.fallbackActive()
  }, 3_000, 10)
  t.ok(opened, 'the shard is down (its call ran past the budget)')
  const spans = await Promise.all(Array.from({ length: n - 2 }, async (_, i) => theSpan(await traceSpans(receiver, traceOf(2 + i), 4), traceOf(2 + i), GATEWAY, 'rate limit')))
  const timedOut = spans.find((span) => span.attributes['petstore.ratelimit.source'] === 'fallback')
  t.ok(timedOut !== undefined && msOf(timedOut) >= STORE_TIMEOUT_MS, `the request whose call timed out: its limiter span lasted ${timedOut === undefined ? '—' : msOf(timedOut).toFixed(1)} ms, the Redis call's budget`)
  t.equal(timedOut?.attributes['petstore.ratelimit.outcome'], 'ok', 'and its answer was the reserve\'s')
  const answered = await get(gw.url, traceOf(n))
  t.equal(answered.status, 200)
  const fallback = theSpan(await traceSpans(receiver, traceOf(n), 4), traceOf(n), GATEWAY, 'rate limit')
  t.equal(fallback.attributes['petstore.ratelimit.source'], 'fallback', 'a decision of the STORE_ON_ERROR policy says so')
  t.equal(fallback.attributes['petstore.ratelimit.outcome'], 'ok')
  t.equal(fallback.attributes['petstore.ratelimit.store'], 'redis', 'the store configured is still Redis')
  // A decision that waited for Redis lasts at least the timeout (timers fire late, never early); one
  // that did not can still be stretched by a busy machine, but not every one of several in a row.
  const more: number[] = []
  for (let i = 1; i <= 5; i++) {
    t.equal((await get(gw.url, traceOf(n + i))).status, 200)
    more.push(msOf(theSpan(await traceSpans(receiver, traceOf(n + i), 4), traceOf(n + i), GATEWAY, 'rate limit')))
  }
  const quickest = Math.min(msOf(fallback), ...more)
  t.ok(quickest < STORE_TIMEOUT_MS, `and they did not wait for Redis (limiter spans ${[msOf(fallback), ...more].map((ms) => ms.toFixed(1)).join(', ')} ms)`)
})

t.test('closed: the 503 of a frozen Redis is the limiter span\'s error and the server span\'s', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const redis = await startRedis(t)
  const gw = await startGateway(t, {
    limiter: { settings: { redisUrl: redis.url, storeOnError: 'closed', storeTimeoutMs: STORE_TIMEOUT_MS} },
    tracing: { settings: tracingTo(receiver.url, GATEWAY) }
  })
  t.teardown(() => redis.signal('SIGCONT'))
  redis.signal('SIGSTOP')
  t.equal((await get(gw.url, traceOf(100))).status, 503)
  const spans = await traceSpans(receiver, traceOf(100), 2)
  const limiter = theSpan(spans, traceOf(100), GATEWAY, 'rate limit')
  t.equal(limiter.attributes['petstore.ratelimit.outcome'], 'unavailable')
  t.equal(limiter.status.code, STATUS_ERROR)
  const server = theSpan(spans, traceOf(100), GATEWAY, 'GET /v1/pets')
  t.equal(server.status.code, STATUS_ERROR)
  t.equal(server.attributes['error.type'], 'unavailable')
  t.equal(server.attributes['http.response.status_code'], 503)
})

t.test('grants: a busy consumer\'s admissions from a block Redis counted say grant, the one that fetched it says store', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const redis = await startRedis(t)
  const gw = await startGateway(t, {
    limiter: { settings: { redisUrl: redis.url} },
    tracing: { settings: tracingTo(receiver.url, GATEWAY) }
  })
  const sources: string[] = []
  // Sequential requests are well over the rate that asks for a block: after the first few, blocks
  // answer, except the request that fetches the next one (a block ends with its second).
  for (let n = 0; n < 60; n++) t.equal((await get(gw.url, traceOf(1_000 + n))).status, 200)
  for (let n = 0; n < 60; n++) {
    const span = theSpan(await traceSpans(receiver, traceOf(1_000 + n), 2), traceOf(1_000 + n), GATEWAY, 'rate limit')
    sources.push(String(span.attributes['petstore.ratelimit.source']))
  }
  t.equal(sources[0], 'store', 'the first request asked Redis')
  const fromBlocks = sources.slice(10).filter((s) => s === 'grant').length
  t.ok(fromBlocks >= 25, `of the last 50, ${fromBlocks} were answered from a counted block (the others fetched one)`)
  t.same(new Set(sources), new Set(['store', 'grant']), 'every other one from a block or its own call')
})
