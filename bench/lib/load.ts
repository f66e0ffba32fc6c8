// Load generation for the benches, with autocannon in this process: a closed-loop run (as many
// requests as N connections get answered: throughput), a constant-rate run whose latencies are kept
// as exact floats (autocannon's own histogram rounds to whole milliseconds, too coarse for a
// "≤ 1 ms added" target), and traffic spread over many keys (one bearer token per request, in turn,
// or in a precomputed order such as the Zipf workload's).
// Every run is bounded by its duration and stops by itself.
import autocannon from 'autocannon'
import { wrkAvailable, wrkThroughput } from './wrk.js'


export interface Run {
  requestsPerSecond: number
  total: number
  latencyP50Ms: number
  latencyP99Ms: number
  non2xx: number
  errors: number
  /** wrk's socket errors by kind, when wrk ran. */
  errorsByKind?: { connect: number, read: number, write: number, timeout: number }
}

export interface LoadOptions {
  url: string
  seconds: number
  connections: number
  /** One token for every request, or a list used in turn (one per request). */
  tokens: readonly string[]
  /**
   * Indices into `tokens`, one per request, replayed from the start of every run (and wrapping):
   * the order of a precomputed workload (bench/lib/zipf.ts). Unset: `tokens` in turn.
   */
  order?: readonly number[]
}

export const median = (xs: readonly number[]): number => {
  const sorted = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  if (sorted.length === 0) return NaN
  return sorted.length % 2 === 1 ? sorted[mid] ?? NaN : ((sorted[mid - 1] ?? NaN) + (sorted[mid] ?? NaN)) / 2
}

export function percentile (sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.ceil(p / 100 * sorted.length) - 1)] ?? NaN
}

function requestsOption (tokens: readonly string[], order: readonly number[] | undefined): autocannon.Request[] | undefined {
  if (tokens.length <= 1) return undefined
  let next = 0
  // Header objects are built once; each request takes the next one (the same work for 2 or 100,000
  // tokens, so runs with different key counts compare fairly).
  const headers = tokens.map((t) => ({ authorization: `Bearer ${t}` }))
  const indices = order ?? tokens.map((_, i) => i)
  return [{
    setupRequest (req) {
      req.headers = headers[indices[next] ?? 0] ?? {}
      next = (next + 1) % indices.length
      return req
    }
  }]
}

export async function throughput (opts: LoadOptions): Promise<Run> {
  const requests = requestsOption(opts.tokens, opts.order)
  const result = await autocannon({
    url: opts.url,
    connections: opts.connections,
    duration: opts.seconds,
    headers: opts.tokens.length === 1 ? { authorization: `Bearer ${opts.tokens[0] ?? ''}` } : {},
    ...(requests === undefined ? {} : { requests })
  })
  return {
    requestsPerSecond: result.requests.average,
    total: result.requests.total,
    latencyP50Ms: result.latency.p50,
    latencyP99Ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors
  }
}

/**
 * A closed-loop run with wrk when it is installed (BENCH_LOADER=autocannon forces autocannon), on
 * `cpus` when given (wrk only: autocannon runs in this process, whose affinity the caller sets).
 */
export async function closedLoop (opts: LoadOptions & { cpus?: string }): Promise<Run> {
  if (process.env.BENCH_LOADER !== 'autocannon' && wrkAvailable()) return await wrkThroughput(opts)
  return await throughput(opts)
}

export function loaderName (): string {
  return process.env.BENCH_LOADER !== 'autocannon' && wrkAvailable() ? 'wrk (1 thread, Lua script: one token per request, in turn or in the workload\'s precomputed order)' : 'autocannon (in the bench process)'
}

export interface RateRun extends Run { rate: number, latencyP90Ms: number, latencyP999Ms: number }

/** `rate` requests per second over `connections`, latency of every answer kept exactly (ms, float). */
export async function fixedRate (opts: LoadOptions & { rate: number }): Promise<RateRun> {
  const samples: number[] = []
  const requests = requestsOption(opts.tokens, opts.order)
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon({
      url: opts.url,
      connections: opts.connections,
      duration: opts.seconds,
      overallRate: opts.rate,
      headers: opts.tokens.length === 1 ? { authorization: `Bearer ${opts.tokens[0] ?? ''}` } : {},
      ...(requests === undefined ? {} : { requests })
    }, (err, res) => { if (err !== null && err !== undefined) reject(err); else resolve(res) })
    instance.on('response', (_client: unknown, _status: number, _bytes: number, ms: number) => { samples.push(ms) })
  })
  samples.sort((a, b) => a - b)
  return {
    rate: opts.rate,
    requestsPerSecond: result.requests.average,
    total: result.requests.total,
    latencyP50Ms: percentile(samples, 50),
    latencyP90Ms: percentile(samples, 90),
    latencyP99Ms: percentile(samples, 99),
    latencyP999Ms: percentile(samples, 99.9),
    non2xx: result.non2xx,
    errors: result.errors
  }
}
