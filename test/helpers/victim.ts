// A legitimate client beside an attack (issue 33, rows 1 and 2): requests at a fixed pace from its
// own source address, each timed from send to the end of its answer, and every failure named
// (reset, refused, timeout). Two kinds: a new connection per request (a client arriving while the
// listener is full), and one kept-alive connection, reopened when the server closes it (a client
// that has been talking to the gateway all along). Used by the edge tests and bench/idle-squat.ts.
import { connect, isIPv6 } from 'node:net'
import { performance } from 'node:perf_hooks'
import { openKeptAlive, type KeptAlive } from './kept-alive.js'

/** An answer slower than this counts as a timeout. */
export const VICTIM_TIMEOUT_MS = 5_000

export interface VictimTarget {
  host: string
  port: number
}

export interface VictimResult {
  sent: number
  answered: number
  /** Milliseconds of every answered request, ascending. */
  latencies: number[]
  statuses: Record<string, number>
  /** Failures by kind: reset (closed without an answer), error (connect failed), timeout. */
  failures: Record<string, number>
  /** Kept-alive victim: times its connection had to be opened again. */
  reconnects: number
}

export interface VictimOptions {
  count: number
  /** Pause between the start of two requests (ms). */
  intervalMs: number
  /** Authorization header value's key, or none (anonymous). */
  key?: string
}

function head (target: VictimTarget, key: string | undefined, close: boolean): string {
  return `GET /v1/pets?limit=1 HTTP/1.1\r\nhost: ${isIPv6(target.host) ? `[${target.host}]` : target.host}` +
    (key === undefined ? '' : `\r\nauthorization: Bearer ${key}`) + (close ? '\r\nconnection: close' : '')
}

/** The p-th percentile of ascending `sorted`. */
export function percentileOf (sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.ceil(p / 100 * sorted.length) - 1)] ?? NaN
}

export function summary (r: VictimResult): string {
  const p = (q: number): string => percentileOf(r.latencies, q).toFixed(1)
  return `${r.answered}/${r.sent} answered (${(100 * r.answered / Math.max(1, r.sent)).toFixed(1)} %), p50 ${p(50)} ms, p99 ${p(99)} ms, ` +
    `max ${p(100)} ms, statuses ${JSON.stringify(r.statuses)}, failures ${JSON.stringify(r.failures)}, reconnects ${r.reconnects}`
}

async function paced (opts: VictimOptions, one: () => Promise<{ status?: number, failure?: string }>, result: VictimResult): Promise<VictimResult> {
  const begun = performance.now()
  for (let i = 0; i < opts.count; i++) {
    const wait = begun + i * opts.intervalMs - performance.now()
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
    const started = performance.now()
    const outcome = await one()
    result.sent++
    if (outcome.status !== undefined) {
      result.answered++
      result.latencies.push(performance.now() - started)
      result.statuses[outcome.status] = (result.statuses[outcome.status] ?? 0) + 1
    } else {
      const kind = outcome.failure ?? 'error'
      result.failures[kind] = (result.failures[kind] ?? 0) + 1
    }
  }
  result.latencies.sort((a, b) => a - b)
  return result
}

function emptyResult (): VictimResult {
  return { sent: 0, answered: 0, latencies: [], statuses: {}, failures: {}, reconnects: 0 }
}

/** One request per new connection from `localAddress`, `Connection: close`. */
export async function victimOnNewConnections (target: VictimTarget, localAddress: string, opts: VictimOptions): Promise<VictimResult> {
  const request = head(target, opts.key, true) + '\r\n\r\n'
  return await paced(opts, async () => await new Promise((resolve) => {
    const socket = connect({ host: target.host, port: target.port, localAddress, ...(isIPv6(target.host) ? { family: 6 } : {}) })
    let text = ''
    let connected = false
    const timer = setTimeout(() => { socket.destroy(); resolve({ failure: 'timeout' }) }, VICTIM_TIMEOUT_MS)
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => { text += chunk })
    socket.on('error', () => {})
    socket.once('connect', () => { connected = true; socket.write(request) })
    socket.once('close', () => {
      clearTimeout(timer)
      const status = Number(text.slice(9, 12))
      resolve(text.startsWith('HTTP/1.1 ') && status > 0 ? { status } : { failure: connected ? 'reset' : 'error' })
    })
  }), emptyResult())
}

/** Requests on one kept-alive connection from `localAddress`, opened again whenever it is gone. */
export async function victimKeptAlive (target: VictimTarget, localAddress: string, opts: VictimOptions, first?: KeptAlive): Promise<VictimResult> {
  const result = emptyResult()
  let connection = first
  const request = head(target, opts.key, false)
  const done = await paced(opts, async () => {
    try {
      if (connection === undefined || connection.closed) {
        if (connection !== undefined) result.reconnects++
        connection = await openKeptAlive(target, localAddress)
      }
      const answer = connection.send(request)
      let timer: NodeJS.Timeout | undefined
      const timeout = new Promise<'timeout'>((resolve) => { timer = setTimeout(() => resolve('timeout'), VICTIM_TIMEOUT_MS) })
      const outcome = await Promise.race([answer, timeout])
      clearTimeout(timer)
      if (outcome === 'timeout') {
        connection.destroy()
        return { failure: 'timeout' }
      }
      return { status: outcome.status }
    } catch {
      return { failure: connection?.closed === true && connection.socket.bytesWritten > 0 ? 'reset' : 'error' }
    }
  }, result)
  connection?.destroy()
  return done
}
