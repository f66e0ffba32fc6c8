// A collector that is down, or that accepts and never answers, costs dropped spans and a metric —
// never a client's time, its answer, or memory: the export queue is bounded (OTEL_BSP_MAX_QUEUE_SIZE)
// and what does not fit is dropped and counted in gateway_trace_spans_dropped_total. Closing the
// gateway is not held by a collector that hangs either.
import t from 'tap'
import { startBackend } from '../../../helpers/backend.js'
import { startGateway } from '../../../helpers/gateway.js'
import { bearer, DEMO_KEYS } from '../../../helpers/config-fixture.js'
import { startOtlpReceiver } from '../../../helpers/otlp-receiver.js'
import { until } from '../../../helpers/poll.js'
import { freePort } from '../../../helpers/ports.js'
import { sampleValue, scrape } from '../../../helpers/scrape.js'
import { tracingTo } from '../../../helpers/tracing.js'
import { DEFAULT_SHUTDOWN_TIMEOUT_MS } from '../../../../src/shared/tracing/sdk.js'

const REQUESTS = 60
/** Gateway spans per proxied request: server, limiter, upstream call, connection wait. */
const SPANS_PER_REQUEST = 4
/** An export that hangs holds the collector's connection this long: far longer than any request may take. */
const HANG_TIMEOUT_MS = 10_000

interface Answer { status: number, body: string, ms: number }

async function burst (url: string): Promise<Answer[]> {
  return await Promise.all(Array.from({ length: REQUESTS }, async () => {
    const started = performance.now()
    const res = await fetch(`${url}/v1/pets?limit=3`, { headers: { ...bearer(DEMO_KEYS.enterprise), traceparent: `00-${'5'.repeat(32)}-${'6'.repeat(16)}-01` } })
    return { status: res.status, body: await res.text(), ms: performance.now() - started }
  }))
}

t.test('collector down: every client gets its answer; the failed exports are counted as dropped', async (t) => {
  const backend = await startBackend(t)
  const expected = await (await fetch(`${backend.url}/v1/pets?limit=3`)).text()
  const deadUrl = `http://127.0.0.1:${await freePort()}`
  const gw = await startGateway(t, {
    backendUrl: backend.url,
    tracing: { settings: tracingTo(deadUrl, 'petstore-gateway', { OTEL_EXPORTER_OTLP_TIMEOUT: '300' }) }
  })
  const answers = await burst(gw.url)
  t.same(answers.map((a) => a.status), Array(REQUESTS).fill(200), 'all 200')
  t.ok(answers.every((a) => a.body === expected), 'each with the backend\'s body')
  const dropped = await until('failed exports counted', async () => {
    const { samples } = await scrape(gw.adminUrl)
    const value = sampleValue(samples, 'gateway_trace_spans_dropped_total', { reason: 'export_failed' }) ?? 0
    return value >= REQUESTS * SPANS_PER_REQUEST && value
  })
  t.equal(dropped, REQUESTS * SPANS_PER_REQUEST, 'every span ended was dropped as export_failed, none twice')
  const { samples } = await scrape(gw.adminUrl)
  t.equal(sampleValue(samples, 'gateway_trace_spans_exported_total'), 0)
})

t.test('collector hangs: answers do not wait for it, the queue stays bounded, and closing does not hang', async (t) => {
  const receiver = await startOtlpReceiver(t)
  receiver.hang(true)
  const backend = await startBackend(t)
  const queue = 20
  const batch = 10
  const gw = await startGateway(t, {
    backendUrl: backend.url,
    tracing: {
      settings: tracingTo(receiver.url, 'petstore-gateway', {
        OTEL_BSP_MAX_QUEUE_SIZE: String(queue),
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: String(batch),
        OTEL_BSP_EXPORT_TIMEOUT: String(HANG_TIMEOUT_MS),
        OTEL_EXPORTER_OTLP_TIMEOUT: String(HANG_TIMEOUT_MS)
      })
    }
  })
  const started = performance.now()
  const answers = await burst(gw.url)
  const burstMs = performance.now() - started
  t.same(answers.map((a) => a.status), Array(REQUESTS).fill(200), 'all 200')
  t.ok(burstMs < HANG_TIMEOUT_MS / 2, `${REQUESTS} requests in ${Math.round(burstMs)} ms: none waited for the ${HANG_TIMEOUT_MS} ms export`)
  await until('the hanging collector received an export', () => receiver.pending >= 1)

  const counts = gw.app.tracing.counts
  if (counts === undefined) throw new Error('tracing is on: counts expected')
  const ended = REQUESTS * SPANS_PER_REQUEST
  // At most one batch is out (hanging) and `queue` spans wait; everything else was dropped at once.
  t.ok(counts.dropped.queue_full >= ended - queue - batch, `${counts.dropped.queue_full} of ${ended} spans dropped as queue_full: at most ${queue + batch} held`)
  const { samples } = await scrape(gw.adminUrl)
  t.equal(sampleValue(samples, 'gateway_trace_spans_dropped_total', { reason: 'queue_full' }), counts.dropped.queue_full, 'and counted in the metric')

  const closing = performance.now()
  await gw.close()
  const closeMs = performance.now() - closing
  // Held, it would wait for the export's own 10 s timeout; the margin over the 2 s bound is for a busy machine.
  t.ok(closeMs < DEFAULT_SHUTDOWN_TIMEOUT_MS + 3_000, `closed in ${Math.round(closeMs)} ms although the collector never answers (bound ${DEFAULT_SHUTDOWN_TIMEOUT_MS} ms)`)
})
