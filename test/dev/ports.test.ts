// The ports handed to the processes tests start (test/helpers/ports.ts) are ones a test's fetch can reach: the
// Fetch standard blocks some ports ("bad port"), and a gateway listening on one looked like a child that never
// came up — "fetch failed" for the whole start timeout, once in about ten full suites. And a port handed out is
// recorded as this process's choice, so that no other test process of the machine (nor this one) hands it out
// while it lives.
import t from 'tap'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { claimPort, FETCH_BLOCKED_PORTS, freePort, isProcessPort, PORT_CLAIMS_DIR } from '../helpers/ports.js'

/** Why this runtime's fetch refuses `port` before connecting, or undefined when it tries to connect. */
async function refusalOf (port: number): Promise<string | undefined> {
  try {
    await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(2_000) })
    return undefined
  } catch (err) {
    const cause = (err as { cause?: unknown }).cause
    const message = cause instanceof Error ? cause.message : ''
    return message === 'bad port' ? message : undefined
  }
}

/** The Fetch standard's blocked ports as the undici package lists them (read from its source: not exported). */
function undiciBadPorts (): number[] {
  const source = readFileSync(join(import.meta.dirname, '..', '..', 'node_modules', 'undici', 'lib', 'web', 'fetch', 'constants.js'), 'utf8')
  const list = /const badPorts = [^[]*\[([^\]]*)\]/.exec(source)?.[1] ?? ''
  return [...list.matchAll(/'(\d+)'/g)].map((match) => Number(match[1]))
}

t.test('the band\'s ports that fetch refuses are exactly the ones freePort leaves out', async (t) => {
  // Only the listed ports are tried (no test ever listens on them): a fetch to a port of the band at large could
  // reach another test's server.
  const listed = undiciBadPorts()
  t.ok(listed.length > 50, `undici lists ${listed.length} ports`)
  const inBand = listed.filter((port) => port >= 4_000 && port < 10_000)
  t.same(inBand, [...FETCH_BLOCKED_PORTS].sort((a, b) => a - b), `in the band: ${inBand.join(', ')}`)
  const reasons = await Promise.all(inBand.map(refusalOf))
  t.same(reasons.filter((reason) => reason !== 'bad port'), [], `this runtime's fetch (${process.version}) refuses each of them before connecting`)
  const open = await freePort()
  t.equal(await refusalOf(open), undefined, `a port freePort gives (${open}) is tried: refused by the kernel, not by fetch`)
})

t.test('freePort never hands out a blocked port', async (t) => {
  const ports = await Promise.all(Array.from({ length: 300 }, async () => await freePort()))
  t.same(ports.filter((port) => FETCH_BLOCKED_PORTS.has(port) || !isProcessPort(port)), [], `300 ports in ${Math.min(...ports)}–${Math.max(...ports)}`)
  t.ok([...FETCH_BLOCKED_PORTS].every((port) => !isProcessPort(port)), 'isProcessPort refuses each blocked port')
})

t.test('a port handed out is claimed: never handed out again while its process lives, taken over once it is gone', async (t) => {
  const port = await freePort()
  const claim = join(PORT_CLAIMS_DIR, String(port))
  t.equal(readFileSync(claim, 'utf8'), String(process.pid), 'freePort recorded this process as the port\'s holder')
  t.equal(claimPort(port), false, 'this process cannot claim it twice (a gateway\'s port and admin port never the same)')

  const sleeper = spawn('sleep', ['30'], { stdio: 'ignore' })
  t.teardown(() => { sleeper.kill() })
  await once(sleeper, 'spawn')
  writeFileSync(claim, String(sleeper.pid))
  t.equal(claimPort(port), false, 'a live process\'s claim holds')

  sleeper.kill()
  await once(sleeper, 'exit')
  t.equal(claimPort(port), true, 'a claim whose process is gone is taken over')
  t.equal(readFileSync(claim, 'utf8'), String(process.pid), 'and recorded as this process\'s')
})
