// The frame of a full-size attack bench: one setup (backend, config, pinning), the gateway of another
// checkout as "before" when BENCH_BASELINE names one and this checkout's as "after", each measured in
// interleaved rounds (the order reversed every other round, so neither always runs on a warmer machine),
// and the setup torn down however the run ends. The bench says what one round measures.
import { loadavg } from 'node:os'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { REPO_ROOT, startRedis, stop } from './processes.js'
import { log } from './report.js'
import { finishBench, prepareBench, startGateway, type BenchSetup, type Target } from './targets.js'

export interface BeforeAfterRun {
  /** What each round measured, in the order measured. */
  readonly runs: Array<Record<string, unknown>>
  /** The setup the rounds ran in (torn down by then): whether it was pinned. */
  readonly setup: BenchSetup | undefined
  readonly begun: number
  readonly loadAtStart: number[]
}

/**
 * `keys`: config keys the gateways hold (2 unless a workload needs more); `logLevel`: the gateways' (warn unless given);
 * `redis`: each gateway on its own redis-server (started beside the backend; its pid in the target's `redisPid`)
 * instead of the in-process store.
 */
export interface BeforeAfterOptions {
  readonly keys?: number
  readonly logLevel?: string
  readonly redis?: boolean
  /**
   * Every gateway process started anew before each round (on the same redis-server): one process's code layout and
   * its JIT's choices move its CPU per request for its whole life, a few µs, so a comparison of one process per side
   * carries that offset; a new pair each round turns it into noise the median of the rounds averages out.
   */
  readonly restartEachRound?: boolean
}

export async function beforeAfter (name: string, rounds: number, measure: (target: Target, round: number) => Promise<Record<string, unknown>>, opts: BeforeAfterOptions = {}): Promise<BeforeAfterRun> {
  return await roundsOf(name, rounds, async (targets, round) => {
    const measured: Array<Record<string, unknown>> = []
    for (const target of round % 2 === 0 ? targets : [...targets].reverse()) measured.push(await measure(target, round))
    return measured
  }, opts)
}

/**
 * The same frame, every gateway measured at once in each round (`measure` loads them side by side): on a machine
 * whose speed moves within seconds, both see the same speed, so their per-round difference is the code's.
 */
export async function beforeAfterTogether (name: string, rounds: number, measure: (targets: readonly Target[], round: number) => Promise<Array<Record<string, unknown>>>, opts: BeforeAfterOptions = {}): Promise<BeforeAfterRun> {
  return await roundsOf(name, rounds, measure, opts)
}

async function roundsOf (name: string, rounds: number, measureRound: (targets: readonly Target[], round: number) => Promise<Array<Record<string, unknown>>>, opts: BeforeAfterOptions): Promise<BeforeAfterRun> {
  const begun = Date.now()
  const loadAtStart = loadavg()
  let setup: BenchSetup | undefined
  const runs: Array<Record<string, unknown>> = []
  try {
    setup = await prepareBench(name, opts.keys ?? 2)
    const targets: Target[] = []
    const baseline = process.env.BENCH_BASELINE
    const { configDir, backendUrl, serverCpus, work } = setup
    const redisOf = new Map<string, { url: string, pid: number | undefined }>()
    const start = async (targetName: string, root: string): Promise<Target> => {
      if (opts.redis !== true) return await startGateway(targetName, { configDir, backendUrl, cpus: serverCpus, root, logLevel: opts.logLevel ?? 'warn' })
      let redis = redisOf.get(targetName)
      if (redis === undefined) {
        const dir = join(work, `redis-${targetName}`)
        mkdirSync(dir)
        const started = await startRedis(dir)
        redis = { url: started.url, pid: started.child.pid }
        redisOf.set(targetName, redis)
      }
      return { ...await startGateway(targetName, { configDir, backendUrl, cpus: serverCpus, root, logLevel: opts.logLevel ?? 'warn', redisUrl: redis.url }), redisPid: redis.pid }
    }
    const roots: Array<[string, string]> = [...(baseline !== undefined && baseline !== '' ? [['before', baseline] as [string, string]] : []), ['after', REPO_ROOT]]
    for (const [targetName, root] of roots) targets.push(await start(targetName, root))
    for (let round = 0; round < rounds; round++) {
      if (opts.restartEachRound === true && round > 0) {
        for (const target of targets) if (target.child !== undefined) await stop(target.child)
        targets.length = 0
        for (const [targetName, root] of roots) targets.push(await start(targetName, root))
      }
      for (const measured of await measureRound(targets, round)) {
        runs.push(measured)
        log(`round ${round + 1} ${String(measured.target ?? measured.name)}: ${JSON.stringify(measured)}`)
      }
    }
    for (const target of targets) if (target.child !== undefined) await stop(target.child)
  } finally {
    await finishBench(setup)
  }
  return { runs, setup, begun, loadAtStart }
}
