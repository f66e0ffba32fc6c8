// Free loopback TCP ports for processes that tests and benches start as subprocesses, and the wait
// until such a process answers HTTP (bench/lib imports both).
import { createServer } from 'node:net'
import { until } from './poll.js'

/**
 * The band a test's processes listen in: below the Redis ports (test/helpers/redis.ts: 10000 up) and, above all,
 * below the kernel's ephemeral range (32768–60999 here), where every outgoing connection of every process on the
 * machine takes its local port. A port chosen there by listen(0) and handed to a child could be taken by any
 * connection in the seconds before the child listens — a gateway that never came up ("fetch failed" for 90 s,
 * once in a suite beside another full suite). Here only another test's choice can collide, and isFree() checks it.
 * The entry points' default ports are left out.
 */
const PROCESS_PORTS = { low: 4_000, high: 10_000 } as const
const DEFAULT_PORTS: ReadonlySet<number> = new Set([3001, 4317, 4318, 6379, 8080, 9090, 9091])

export async function freePort (): Promise<number> {
  for (;;) {
    const port = PROCESS_PORTS.low + Math.floor(Math.random() * (PROCESS_PORTS.high - PROCESS_PORTS.low))
    if (!DEFAULT_PORTS.has(port) && await isFree(port)) return port
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
  await until(url, async () => {
    const res = await fetch(url)
    await res.arrayBuffer()
    return accepted(res.status)
  }, timeoutMs, intervalMs)
  return Date.now() - started
}
