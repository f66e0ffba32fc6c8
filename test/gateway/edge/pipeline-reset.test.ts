// A reset in the middle of a pipeline costs nothing (issue 33, row 3). The attack: 32 pipelined
// requests on a connection, then a TCP reset (SO_LINGER 0), 100 times. Before, the requests the
// parser had already read ran on after their socket was gone: `request.ip` was undefined in the
// shedding hook (a TypeError 500 with its stack logged per request) and the in-flight count leaked
// (responses queued behind the first never emit 'close'). Real sockets, load shedding on.
import { connect } from 'node:net'
import t from 'tap'
import { startGateway } from '../../helpers/gateway.js'
import { DEMO_KEYS } from '../../helpers/config-fixture.js'
import { until } from '../../helpers/poll.js'
import { sampleValue, scrape, type Sample } from '../../helpers/scrape.js'

const PIPELINED = 32
const RESETS = 100

/** `count` requests in one write: anonymous ones and keyed ones in turn. */
function pipeline (count: number): string {
  let text = ''
  for (let i = 0; i < count; i++) {
    text += i % 2 === 0
      ? 'GET /v1/pets HTTP/1.1\r\nhost: gateway\r\n\r\n'
      : `GET /v1/pets HTTP/1.1\r\nhost: gateway\r\nauthorization: Bearer ${DEMO_KEYS.enterprise}\r\n\r\n`
  }
  return text
}

/** Connects, writes the pipeline, and resets the connection (RST) as soon as the first bytes of an answer arrive, or after `afterMs`. */
async function pipelineThenReset (port: number, afterMs: number): Promise<void> {
  await new Promise<void>((resolve) => {
    const socket = connect({ host: '127.0.0.1', port })
    socket.on('error', () => {})
    socket.on('close', () => resolve())
    socket.once('connect', () => {
      socket.write(pipeline(PIPELINED))
      const timer = setTimeout(() => socket.resetAndDestroy(), afterMs)
      socket.once('data', () => { clearTimeout(timer); socket.resetAndDestroy() })
    })
  })
}

function total (samples: Sample[], name: string, match: (labels: Record<string, string>) => boolean): number {
  return samples.filter((s) => s.name === name && match(s.labels)).reduce((sum, s) => sum + s.value, 0)
}

t.test('32 pipelined requests then a reset, 100 times: no 5xx, no log line per request, nothing left in flight', async (t) => {
  const gw = await startGateway(t, { logLevel: 'warn', loadShedding: {} })
  const port = Number(new URL(gw.url).port)
  for (let i = 0; i < RESETS; i++) await pipelineThenReset(port, i % 4)

  const { samples } = await scrape(gw.adminUrl)
  const fiveHundreds = total(samples, 'gateway_requests_total', (l) => (l.status ?? '').startsWith('5'))
  t.equal(fiveHundreds, 0, 'no 5xx answered or counted')
  const errorLines = gw.logs.filter((l) => typeof l.level === 'number' && l.level >= 50)
  t.comment(JSON.stringify(samples.filter((s) => s.name === 'gateway_requests_total' && s.value > 0)))
  t.comment(`5xx counted: ${fiveHundreds}; error lines: ${errorLines.length}, ${gw.rawLogs().length} bytes of log; ` +
    `in flight: ${sampleValue(samples, 'gateway_in_flight_requests')}; kinds: ${[...new Set(errorLines.map((l) => String((l.err as { message?: string } | undefined)?.message)))].join(' | ')}`)
  t.ok(errorLines.length <= 1, `at most one error line for the whole attack (saw ${errorLines.length})`)
  t.notMatch(gw.rawLogs(), /TypeError/, 'no TypeError anywhere')
  await until('the in-flight count back to 0', async () => {
    const now = await scrape(gw.adminUrl)
    return sampleValue(now.samples, 'gateway_in_flight_requests') === 0 && gw.app.loadShedding.inFlight === 0
  }, 5_000)
  t.equal(gw.app.drain.inFlight, 0, 'the drain counter holds nothing')
  t.equal(gw.app.connections.open, 0, 'every connection gone')

  // And the gateway still answers as before.
  const res = await fetch(`${gw.url}/v1/pets`, { headers: { authorization: `Bearer ${DEMO_KEYS.pro}` } })
  t.equal(res.status, 200)
  await res.arrayBuffer()
})
