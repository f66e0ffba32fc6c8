// Free loopback TCP ports for processes that tests and benches start as subprocesses, and the wait
// until such a process answers HTTP (bench/lib imports both).
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { until } from './poll.js'

/**
 * The band a test's processes listen in: below the Redis ports (test/helpers/redis.ts: 10000 up) and, above all,
 * below the kernel's ephemeral range (32768–60999 here), where every outgoing connection of every process on the
 * machine takes its local port: a port chosen there by listen(0) and handed to a child could be taken by any
 * connection in the seconds before the child listens. Here only another test's choice can collide, and isFree() checks it.
 * The entry points' default ports are left out.
 */
const PROCESS_PORTS = { low: 4_000, high: 10_000 } as const
const DEFAULT_PORTS: ReadonlySet<number> = new Set([3001, 4317, 4318, 6379, 8080, 9090, 9091])

/**
 * The ports of the band that `fetch` refuses to connect to: the Fetch standard's "bad ports"
 * (https://fetch.spec.whatwg.org/#port-blocking; undici, Node's fetch, follows it). A child listening on one
 * is never reached by a test's fetch — "fetch failed" (cause: "bad port") for the whole start timeout, while the
 * child serves. It failed a full suite about once in ten (6668 in CI; 6697 alone). test/dev/ports.test.ts checks
 * this list against undici's.
 */
export const FETCH_BLOCKED_PORTS: ReadonlySet<number> = new Set([4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697])

/** Whether `port` may be handed to a test's process: in the band, no entry point's default, reachable by fetch. */
export function isProcessPort (port: number): boolean {
  return port >= PROCESS_PORTS.low && port < PROCESS_PORTS.high && !DEFAULT_PORTS.has(port) && !FETCH_BLOCKED_PORTS.has(port)
}

/**
 * Where the test and bench processes of this machine record the ports they hand out, one file per port holding the
 * choosing process's pid: a port is free to hand out only if it is not bound (isFree) and no live process chose it.
 * Without the record a port was chosen free and given to a child, and in the second or so before the child listened,
 * another test (of this suite, of a suite beside it, or this process's own next choice) could choose it too: "port
 * 6792 is in use (GATEWAY_PORT)" failed a paired run once (30 Nov). A claim lasts as long as its process; one whose
 * process is gone is taken over.
 */
export const PORT_CLAIMS_DIR = join(tmpdir(), 'petstore-gateway-test-ports')

/** Whether process `pid` runs (one of another user's counts too). */
export function processAlive (pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/**
 * Records `port` as this process's choice; false if a live process (this one included) chose it before. A
 * directory that cannot be written leaves every port unclaimed, as before the record.
 */
export function claimPort (port: number): boolean {
  const file = join(PORT_CLAIMS_DIR, String(port))
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      mkdirSync(PORT_CLAIMS_DIR, { recursive: true })
      writeFileSync(file, String(process.pid), { flag: 'wx' })
      return true
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') return true
    }
    let holder = NaN
    try {
      holder = Number(readFileSync(file, 'utf8'))
    } catch {
      // gone since: try again
    }
    if (processAlive(holder)) return false
    // Its process is gone: the claim is taken over. Two processes taking one over at the same instant could both
    // remove it and one re-create it: both would have to pick this port within that instant.
    rmSync(file, { force: true })
  }
  return false
}

export async function freePort (): Promise<number> {
  for (;;) {
    const port = PROCESS_PORTS.low + Math.floor(Math.random() * (PROCESS_PORTS.high - PROCESS_PORTS.low))
    if (isProcessPort(port) && claimPort(port) && await isFree(port)) return port
  }
}

/** Whether `port` can be listened on at 127.0.0.1 right now. */
export async function isFree (port: number): Promise<boolean> {
  return await new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}

/**
 * How long a test waits for a process it started (a gateway, the backend, npm start) to answer: it
 * loads its TypeScript (type stripping; npm start: tsx), 1–3 s on a quiet machine, and start-ups past 15 and 30 s were
 * seen at load 16–18 on the 2-core CI machine (a full suite beside six others). Only tells a hang
 * from a slow start: what a test asserts about its process comes after.
 */
export const PROCESS_START_TIMEOUT_MS = 90_000

/**
 * Polls `url` until it answers with a status `accepted` takes (any, by default) or `timeoutMs` passes;
 * resolves to the time it took.
 */
export async function waitForHttp (url: string, timeoutMs = 10_000, accepted: (status: number) => boolean = () => true, intervalMs = 50): Promise<number> {
  const started = Date.now()
  await until(url, async () => await answersHttp(url, accepted), timeoutMs, intervalMs)
  return Date.now() - started
}

/** One probe of a wait: whether `url` answers with a status `accepted` takes (its body read, so the connection is free). */
export async function answersHttp (url: string, accepted: (status: number) => boolean): Promise<boolean> {
  const res = await fetch(url)
  await res.arrayBuffer()
  return accepted(res.status)
}
