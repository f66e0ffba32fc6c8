// A well-behaved client beside a load generator: requests at fixed times (open loop, so a slow
// answer does not delay the next request the way a closed loop would), each timed exactly from its
// send to its last byte, whatever it was answered. What it sees is what an ordinary client of an
// overloaded gateway sees.
import { performance } from 'node:perf_hooks'
import { Pool } from 'undici'

/** Requests in flight at most; more would be the probe overloading the gateway itself. */
export const DEFAULT_PROBE_CONNECTIONS = 32
/** A probe request not answered within this is an error (the gateway's own budgets are shorter). */
export const DEFAULT_PROBE_TIMEOUT_MS = 30_000

export interface ProbeResult {
  sent: number
  /** Milliseconds, sorted ascending, of every request answered. */
  latencies: number[]
  statuses: Record<string, number>
  errors: number
}

export interface Probe {
  /** Runs `rate` requests per second for `seconds`. */
  run: (rate: number, seconds: number) => Promise<ProbeResult>
  close: () => Promise<void>
}

/**
 * A probe with its connections already open: a client that has been talking to the gateway for a
 * while, not one whose first connection queues behind a load generator's thousand at accept.
 */
export async function openProbe (url: string, token: string, connections = DEFAULT_PROBE_CONNECTIONS): Promise<Probe> {
  const target = new URL(url)
  const path = target.pathname + target.search
  const pool = new Pool(target.origin, { connections, headersTimeout: DEFAULT_PROBE_TIMEOUT_MS, bodyTimeout: DEFAULT_PROBE_TIMEOUT_MS })
  const headers = { authorization: `Bearer ${token}` }
  // Concurrent requests until the pool holds `connections` sockets.
  await Promise.all(Array.from({ length: connections }, async () => {
    const res = await pool.request({ path, method: 'GET', headers })
    await res.body.arrayBuffer()
  }))

  async function run (rate: number, seconds: number): Promise<ProbeResult> {
    const latencies: number[] = []
    const statuses: Record<string, number> = {}
    let errors = 0
    const pending: Array<Promise<void>> = []
    const one = async (): Promise<void> => {
      const started = performance.now()
      try {
        const res = await pool.request({ path, method: 'GET', headers })
        await res.body.arrayBuffer()
        latencies.push(performance.now() - started)
        statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1
      } catch {
        errors++
      }
    }
    const total = Math.round(rate * seconds)
    const begun = performance.now()
    for (let i = 0; i < total; i++) {
      const wait = begun + i * 1000 / rate - performance.now()
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
      pending.push(one())
    }
    await Promise.all(pending)
    latencies.sort((a, b) => a - b)
    return { sent: total, latencies, statuses, errors }
  }

  return { run, close: async () => { await pool.close() } }
}
