// The wait for a backend connection as traces show it: since the proxy's upstream gate holds a
// request until a connection is free, that wait happens before undici sees the request, and the
// upstream call's span and its `upstream connection` span start where the request began to wait.
import t from 'tap'
import { startEchoUpstream } from '../../../helpers/echo-upstream.js'
import { bearer, DEMO_KEYS, startGateway } from '../../../helpers/gateway.js'
import { startOtlpReceiver } from '../../../helpers/otlp-receiver.js'
import { theSpan, traceSpans, tracingTo } from '../../../helpers/tracing.js'

const GATEWAY = 'petstore-gateway'
const BACKEND_MS = 300

t.test('one backend connection, two requests at once: the second\'s connection wait covers the first\'s backend time', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const upstream = await startEchoUpstream(t)
  const timers: NodeJS.Timeout[] = []
  t.teardown(() => { for (const timer of timers) clearTimeout(timer) })
  upstream.behave((_req, res) => {
    timers.push(setTimeout(() => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end('[]')
    }, BACKEND_MS))
  })
  const gw = await startGateway(t, { backendUrl: upstream.url, upstreamConnections: 1, tracing: { settings: tracingTo(receiver.url, GATEWAY) } })
  const traces = ['a', 'b'].map((c) => c.repeat(32))
  const statuses = await Promise.all(traces.map(async (trace) => {
    const res = await fetch(`${gw.url}/v1/pets`, { headers: { ...bearer(DEMO_KEYS.enterprise), traceparent: `00-${trace}-${'7'.repeat(16)}-01` } })
    await res.arrayBuffer()
    return res.status
  }))
  t.same(statuses, [200, 200])
  const waits = await Promise.all(traces.map(async (trace) => {
    const spans = await traceSpans(receiver, trace, 4)
    const call = theSpan(spans, trace, GATEWAY, 'GET')
    const connection = theSpan(spans, trace, GATEWAY, 'upstream connection')
    t.equal(connection.startNs, call.startNs, 'the call and its connection wait start together, when the request began to wait')
    return Number(connection.endNs - connection.startNs) / 1e6
  }))
  const [shorter, longer] = [...waits].sort((a, b) => a - b) as [number, number]
  // Timers fire late on a busy machine, never early: the backend's 300 ms is a floor, so the
  // second's wait exceeds the first's by at least the first's backend time, however loaded.
  t.ok(longer - shorter >= BACKEND_MS * 0.9, `the second waited for the connection through the first's backend time (${longer.toFixed(1)} ms against ${shorter.toFixed(1)} ms)`)
})
