// Issue 39: /healthz said 200 while the public listener answered nothing. Now it fails (503) while
// the gateway is wedged, and recovers by itself when it is not: (1) its event loop blocked on
// purpose — a busy wait in the process the gateway runs in; (2) its upstream gate held — every
// backend connection taken by requests the backend never answers, more waiting. /readyz names the
// cause as its `serving` check. Thresholds are shortened here; the shipped ones are in
// docs/operations.md (Liveness).
import { performance } from 'node:perf_hooks'
import t from 'tap'
import { Liveness } from '../../../src/gateway/runtime/liveness.js'
import { startHeldUpstream } from '../../helpers/echo-upstream.js'
import { startGateway } from '../../helpers/gateway.js'
import { DEMO_KEYS } from '../../helpers/config-fixture.js'
import { until } from '../../helpers/poll.js'

interface Health { status: string, checks?: Record<string, { ok: boolean, error?: string }> }

async function health (adminUrl: string): Promise<{ status: number, body: Health }> {
  const res = await fetch(`${adminUrl}/healthz`)
  return { status: res.status, body: await res.json() as Health }
}

async function readiness (adminUrl: string): Promise<{ status: number, serving: { ok: boolean, error?: string } | undefined }> {
  const res = await fetch(`${adminUrl}/readyz`)
  const body = await res.json() as { checks: Record<string, { ok: boolean, error?: string }> }
  return { status: res.status, serving: body.checks.serving }
}

function busyWait (ms: number): void {
  const end = performance.now() + ms
  while (performance.now() < end) { /* the loop is blocked on purpose */ }
}

t.test('the event loop blocked for 1.2 s: /healthz fails, /readyz says why, then both recover', async (t) => {
  const gw = await startGateway(t, { liveness: { loopStallMs: 500, loopWindowMs: 2_000 } })
  // A loaded machine may stall the loop by itself now and then: wait for a live start.
  await until('live before the block', async () => (await health(gw.adminUrl)).status === 200, 20_000)

  busyWait(1_200)
  const during = await health(gw.adminUrl)
  t.equal(during.status, 503, '/healthz fails right after the stall')
  t.equal(during.body.status, 'wedged')
  t.match(during.body.checks?.loop?.error, /event loop/, `names the loop: ${during.body.checks?.loop?.error}`)
  const ready = await readiness(gw.adminUrl)
  t.equal(ready.status, 503, '/readyz fails too')
  t.match(ready.serving?.error, /event loop/, 'and says why (serving)')

  const recoveredAfter = performance.now()
  await until('live again', async () => (await health(gw.adminUrl)).status === 200, 15_000)
  t.comment(`live again ${Math.round(performance.now() - recoveredAfter)} ms after the stall (window 2000 ms)`)
  t.equal((await readiness(gw.adminUrl)).serving?.ok, true, 'serving ok again')
})

t.test('every backend connection held and none given back, requests waiting: /healthz fails; given back: it recovers', async (t) => {
  const backend = await startHeldUpstream(t)
  const gw = await startGateway(t, {
    backendUrl: backend.url,
    upstreamConnections: 2,
    upstreamTimeoutMs: 60_000,
    liveness: { upstreamStallMs: 500, loopStallMs: 60_000 }
  })
  t.equal((await health(gw.adminUrl)).status, 200, 'live at first')
  const requests = Array.from({ length: 3 }, async () => {
    const res = await fetch(`${gw.url}/v1/pets?limit=1`, { headers: { authorization: `Bearer ${DEMO_KEYS.enterprise}` } })
    await res.arrayBuffer()
    return res.status
  })
  await until('both connections held, one request waiting', () => gw.app.upstream.inFlight === 2 && gw.app.upstream.queued === 1)
  t.equal((await health(gw.adminUrl)).status, 200, 'a full gate is not wedged yet')
  const failed = await until('/healthz failing', async () => {
    const h = await health(gw.adminUrl)
    return h.status === 503 ? h : undefined
  }, 10_000)
  t.match(failed.body.checks?.upstream?.error, /every backend connection held/, `names the gate: ${failed.body.checks?.upstream?.error}`)
  t.equal(failed.body.checks?.loop?.ok, true, 'the loop is fine')
  t.match((await readiness(gw.adminUrl)).serving?.error, /backend connection/, '/readyz says why')

  backend.release()
  t.same(await Promise.all(requests), [200, 200, 200], 'every request answered once the backend answers')
  t.equal((await health(gw.adminUrl)).status, 200, 'live again')
})

t.test('the verdict on an injected clock: a stall fails for the window after it, the watchdog late fails at once', async (t) => {
  let now = 0
  const liveness = new Liveness({ loopStallMs: 1_000, loopWindowMs: 5_000, upstreamStallMs: 3_000 }, () => now)
  const upstream = { stalled: 0, stalledMs () { return this.stalled } }
  now += liveness.tickMs
  liveness.tick()
  t.equal(liveness.report(upstream).live, true)
  now += 1_300
  t.equal(liveness.report(upstream).checks.loop.ok, false, 'no tick for 1.05 s beyond its period: not turning')
  now += liveness.tickMs
  liveness.tick()
  t.match(liveness.report(upstream).checks.loop.error, /stalled for 1300 ms/)
  for (let i = 0; i < 19; i++) {
    now += liveness.tickMs
    liveness.tick()
  }
  t.equal(liveness.report(upstream).checks.loop.ok, false, 'within the window after the stall: still failing')
  for (let i = 0; i < 2; i++) {
    now += liveness.tickMs
    liveness.tick()
  }
  t.equal(liveness.report(upstream).checks.loop.ok, true, 'the window over: live')
  upstream.stalled = 3_001
  t.equal(liveness.report(upstream).checks.upstream.ok, false, 'gate stalled past its limit')
  upstream.stalled = 3_000
  t.equal(liveness.report(upstream).live, true, 'at its limit: not yet')
})
