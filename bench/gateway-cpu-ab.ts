// CPU per request of the gateway (on the in-process store, or on Redis), this checkout against another
// (BENCH_BASELINE: a detached checkout of the code before, with node_modules), read so that a shared
// machine's load moves it least: each gateway pinned to one core (the load generator and the backend
// on the other), its own CPU from /proc over a closed-loop load window, divided by the requests it
// answered; rounds interleaved (the order reversed every other round; or both at once, below), each window after a short
// warm-up on the same workload. Info logs, metrics on, as the bench's gateway rows. Prints each
// round and, per workload, the medians, the range and the median of the per-round differences.
//   BENCH_BASELINE=/path/to/checkout node --import ./src/ts-resolve.ts bench/gateway-cpu-ab.ts
//   BENCH_CHECKOUT_RUNTIME=1: each gateway on its own checkout's Node (node_modules/.bin/node), e.g. the same
//   code on Node 22 (the baseline) and on Node 24 (this checkout)
//   GATEWAY_AB_WORKLOADS (hot,zipf) GATEWAY_AB_ROUNDS (7) GATEWAY_AB_SECONDS (10)
//   GATEWAY_AB_WARMUP_SECONDS (2) BENCH_CONNECTIONS (32)
//   GATEWAY_AB_TOGETHER=1: both gateways loaded at once in each round (a wrk each), their CPU read over the same
//   window — on a machine whose speed moves within seconds, the steadier comparison
//   GATEWAY_AB_RESTART=1: both gateways started anew before every round (a process's own offset, from its code
//   layout and its JIT's choices, becomes noise the rounds average out instead of a bias of the whole run)
//   GATEWAY_AB_STORE=memory (default) | redis: each gateway on its own redis-server, whose CPU per
//   request is read the same way and reported beside the gateway's (process + Redis).
// Beside each CPU figure: its system (kernel) part, and the read + write system calls per request
// (/proc/PID/io), which load does not move: what a store's sockets cost the gateway process.
import { loadavg } from 'node:os'
import { beforeAfter, beforeAfterTogether } from './lib/before-after.js'
import { closedLoop, median, throughput, type LoadOptions, type Run } from './lib/load.js'
import { cpuMicros, ioCalls, systemMicros } from './lib/proc-cpu.js'
import { DEFAULT_PATH, type Target } from './lib/targets.js'
import { buildWorkloads, CONFIG_KEYS, selectWorkloads, type Workload } from './lib/workloads.js'

export const DEFAULT_AB_ROUNDS = 7
export const DEFAULT_AB_SECONDS = 10
export const DEFAULT_AB_WARMUP_SECONDS = 2

interface RoundResult { target: string, workload: string, requests: number, cpuMicros: number, perRequest: number, redisPerRequest: number, systemPerRequest: number, syscallsPerRequest: number }

/** A target's CPU (process, its kernel part, its Redis) and read + write system calls so far, read once each. */
function usageOf (target: Target): { cpu: number, system: number, calls: number, redis: number } {
  return { cpu: cpuMicros(target.pid), system: systemMicros(target.pid), calls: ioCalls(target.pid), redis: target.redisPid === undefined ? 0 : cpuMicros(target.redisPid) }
}

/**
 * Every target of `targets` under the same load at once, one `load` each (autocannon in this process one at a time;
 * wrk for targets loaded together, GATEWAY_AB_TOGETHER): their CPU read over the same window, so a change of the
 * machine's speed within the round falls on all of them alike.
 */
async function measure (targets: readonly Target[], workload: Workload, seconds: number, warmup: number, connections: number, load: (opts: LoadOptions) => Promise<Run>): Promise<RoundResult[]> {
  const loadOf = (target: Target, duration: number): LoadOptions => ({
    url: `${target.url}${DEFAULT_PATH}`, connections, tokens: workload.tokens, seconds: duration, ...(workload.order === undefined ? {} : { order: workload.order })
  })
  await Promise.all(targets.map(async (target) => await load(loadOf(target, warmup))))
  const before = targets.map(usageOf)
  const runs = await Promise.all(targets.map(async (target) => await load(loadOf(target, seconds))))
  return targets.map((target, index) => {
    const start = before[index]!
    const end = usageOf(target)
    const total = runs[index]!.total
    const requests = Math.max(1, total)
    return {
      target: target.name,
      workload: workload.id,
      requests: total,
      cpuMicros: end.cpu - start.cpu,
      perRequest: (end.cpu - start.cpu) / requests,
      redisPerRequest: (end.redis - start.redis) / requests,
      systemPerRequest: (end.system - start.system) / requests,
      syscallsPerRequest: (end.calls - start.calls) / requests
    }
  })
}

/** One round's figures of one target, as the table reads them. */
function roundFields (results: readonly RoundResult[], redis: boolean): Record<string, number> {
  const fields: Record<string, number> = {}
  for (const result of results) {
    fields[result.workload] = Number(result.perRequest.toFixed(1))
    fields[`${result.workload}Requests`] = result.requests
    fields[`${result.workload}System`] = Number(result.systemPerRequest.toFixed(1))
    fields[`${result.workload}Syscalls`] = Number(result.syscallsPerRequest.toFixed(2))
    if (redis) fields[`${result.workload}Redis`] = Number(result.redisPerRequest.toFixed(1))
  }
  return fields
}

async function main (): Promise<void> {
  const rounds = Number(process.env.GATEWAY_AB_ROUNDS ?? DEFAULT_AB_ROUNDS)
  const seconds = Number(process.env.GATEWAY_AB_SECONDS ?? DEFAULT_AB_SECONDS)
  const warmup = Number(process.env.GATEWAY_AB_WARMUP_SECONDS ?? DEFAULT_AB_WARMUP_SECONDS)
  const connections = Number(process.env.BENCH_CONNECTIONS ?? 32)
  const workloads = buildWorkloads(selectWorkloads(process.env.GATEWAY_AB_WORKLOADS ?? 'hot,zipf'))
  const redis = process.env.GATEWAY_AB_STORE === 'redis'
  const together = process.env.GATEWAY_AB_TOGETHER === '1'
  const restart = process.env.GATEWAY_AB_RESTART === '1'
  const options = { keys: CONFIG_KEYS, logLevel: 'info', redis, restartEachRound: restart }
  const { runs, setup, loadAtStart } = together
    ? await beforeAfterTogether('gateway-cpu-ab', rounds, async (targets) => {
      const results: RoundResult[] = []
      for (const workload of workloads) results.push(...await measure(targets, workload, seconds, warmup, connections, closedLoop))
      return targets.map((target) => ({ target: target.name, ...roundFields(results.filter((result) => result.target === target.name), redis), load: Number(loadavg()[0]!.toFixed(2)) }))
    }, options)
    : await beforeAfter('gateway-cpu-ab', rounds, async (target) => {
      const results: RoundResult[] = []
      for (const workload of workloads) results.push(...await measure([target], workload, seconds, warmup, connections, throughput))
      return { target: target.name, ...roundFields(results, redis), load: Number(loadavg()[0]!.toFixed(2)) }
    }, options)
  const lines = [`gateway on ${redis ? 'Redis (its own redis-server each)' : 'the in-process store'}, CPU µs per request from /proc, ${rounds} ${together ? 'rounds (both gateways loaded at once, a wrk each)' : 'interleaved rounds'}${restart ? ', new processes each round' : ''} of ${seconds} s (after ${warmup} s of warm-up), ${connections} connections, pinned: ${String(setup?.pinned ?? false)}; load average at start ${loadAtStart.map((x) => x.toFixed(2)).join(', ')}, at end ${loadavg().map((x) => x.toFixed(2)).join(', ')}`,
    '| workload | before: median (range) | after: median (range) | after − before, median of rounds (range) |', '|---|---:|---:|---:|']
  const rows = workloads.flatMap((workload) => redis
    ? [{ title: `${workload.id}: gateway process`, field: workload.id }, { title: `${workload.id}: its Redis`, field: `${workload.id}Redis` }]
    : [{ title: workload.id, field: workload.id }]).flatMap((row) => row.field.endsWith('Redis')
    ? [row]
    : [row, { title: `${row.title}: of it system (kernel)`, field: `${row.field}System` }, { title: `${row.title}: read + write syscalls per request`, field: `${row.field}Syscalls` }])
  for (const row of rows) {
    const of = (name: string): number[] => runs.filter((r) => r.target === name).map((r) => Number(r[row.field]))
    const before = of('before')
    const after = of('after')
    const deltas = after.map((a, i) => a - (before[i] ?? NaN)).filter((d) => Number.isFinite(d))
    const digits = row.field.endsWith('Syscalls') ? 2 : 1
    const cell = (xs: number[]): string => xs.length === 0 ? '–' : `${median(xs).toFixed(digits)} (${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)})`
    const faster = deltas.filter((d) => d < 0).length
    lines.push(`| ${row.title} | ${cell(before)} | ${cell(after)} | ${deltas.length === 0 ? '–' : `${median(deltas).toFixed(digits)} (${Math.min(...deltas).toFixed(digits)} to ${Math.max(...deltas).toFixed(digits)}; ${faster} of ${deltas.length} rounds lower)`} |`)
  }
  process.stdout.write(lines.join('\n') + '\n')
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) await main()
