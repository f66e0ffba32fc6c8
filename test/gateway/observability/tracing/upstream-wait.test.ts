// The wait for a backend connection as traces show it: since the proxy's upstream gate holds a
// request until a connection is free, that wait happens before undici sees the request, and the
// upstream call's span and its `upstream connection` span start where the request began to wait.
//
// Steady on a busy machine by design: the backend holds the first request until the test releases
// it, so the second's wait is proven by an order of events, not by a duration — it began before the
// release and ended after it, while the first's ended before. Each comparison is on the clock the
// span was stamped with: a span's start is the gate's performance.now() instant, its end the SDK's
// Date.now() (a span given its start time is ended at Date.now(), whole ms).
import { performance } from 'node:perf_hooks'
import t from 'tap'
import { startHeldUpstream } from '../../../helpers/echo-upstream.js'
import { startGateway } from '../../../helpers/gateway.js'
import { bearer, DEMO_KEYS } from '../../../helpers/config-fixture.js'
import { startOtlpReceiver } from '../../../helpers/otlp-receiver.js'
import { until } from '../../../helpers/poll.js'
import { theSpan, traceSpans, tracingTo } from '../../../helpers/tracing.js'

const GATEWAY = 'petstore-gateway'

/** performance.now() as ns since the epoch: the clock the gate's queued-at instant is given in. */
function performanceNs (): bigint {
  return BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6))
}

const ms = (ns: bigint): string => (Number(ns) / 1e6).toFixed(1)

t.test('one backend connection, two requests at once: the second\'s connection wait covers the first\'s backend time', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const upstream = await startHeldUpstream(t)
  const gw = await startGateway(t, { backendUrl: upstream.url, upstreamConnections: 1, tracing: { settings: tracingTo(receiver.url, GATEWAY) } })
  const [first, second] = ['a', 'b'].map((c) => c.repeat(32)) as [string, string]
  const get = async (trace: string): Promise<number> => {
    const res = await fetch(`${gw.url}/v1/pets`, { headers: { ...bearer(DEMO_KEYS.enterprise), traceparent: `00-${trace}-${'7'.repeat(16)}-01` } })
    await res.arrayBuffer()
    return res.status
  }

  const firstStatus = get(first)
  await until('the first request at the backend', () => upstream.received.length === 1)
  const secondStatus = get(second)
  await until('the second request waiting at the gate', () => gw.app.upstream.queued === 1)
  t.equal(upstream.received.length, 1, 'while the first holds the one connection, the second does not reach the backend')
  const releasedAtPerformanceNs = performanceNs()
  const releasedAtDateNs = BigInt(Date.now()) * 1_000_000n
  upstream.releaseOne()
  await until('the second request at the backend once the first was answered', () => upstream.received.length === 2)
  upstream.release()
  t.same(await Promise.all([firstStatus, secondStatus]), [200, 200])

  const connectionOf = async (trace: string): Promise<{ startNs: bigint, endNs: bigint }> => {
    const spans = await traceSpans(receiver, trace, 4)
    const call = theSpan(spans, trace, GATEWAY, 'GET')
    const connection = theSpan(spans, trace, GATEWAY, 'upstream connection')
    t.equal(connection.startNs, call.startNs, 'the call and its connection wait start together, when the request began to wait')
    return connection
  }
  const firstWait = await connectionOf(first)
  const secondWait = await connectionOf(second)
  t.ok(firstWait.endNs <= releasedAtDateNs, 'the first had its connection before its backend answered')
  t.ok(secondWait.startNs < releasedAtPerformanceNs, 'the second began to wait before the first\'s backend answered')
  t.ok(secondWait.endNs >= releasedAtDateNs, 'the second waited for the connection through the first\'s backend time')
  t.comment(`connection waits: first ${ms(firstWait.endNs - firstWait.startNs)} ms, second ${ms(secondWait.endNs - secondWait.startNs)} ms; ` +
    `the first's backend time (release − its wait's end) ${ms(releasedAtDateNs - firstWait.endNs)} ms`)
})
