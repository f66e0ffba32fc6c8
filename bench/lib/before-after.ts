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
export interface BeforeAfterOptions { readonly keys?: number, readonly logLevel?: string, readonly redis?: boolean }

export async function beforeAfter (name: string, rounds: number, measure: (target: Target, round: number) => Promise<Record<string, unknown>>, opts: BeforeAfterOptions = {}): Promise<BeforeAfterRun> {
  const begun = Date.now()
  const loadAtStart = loadavg()
  let setup: BenchSetup | undefined
  const runs: Array<Record<string, unknown>> = []
  try {
    setup = await prepareBench(name, opts.keys ?? 2)
    const targets: Target[] = []
    const baseline = process.env.BENCH_BASELINE
    const { configDir, backendUrl, serverCpus, work } = setup
    const start = async (targetName: string, root: string): Promise<Target> => {
      if (opts.redis !== true) return await startGateway(targetName, { configDir, backendUrl, cpus: serverCpus, root, logLevel: opts.logLevel ?? 'warn' })
      const dir = join(work, `redis-${targetName}`)
      mkdirSync(dir)
      const redis = await startRedis(dir)
      return { ...await startGateway(targetName, { configDir, backendUrl, cpus: serverCpus, root, logLevel: opts.logLevel ?? 'warn', redisUrl: redis.url }), redisPid: redis.child.pid }
    }
    if (baseline !== undefined && baseline !== '') targets.push(await start('before', baseline))
    targets.push(await start('after', REPO_ROOT))
    for (let round = 0; round < rounds; round++) {
      for (const target of round % 2 === 0 ? targets : [...targets].reverse()) {
        const measured = await measure(target, round)
        runs.push(measured)
        log(`round ${round + 1} ${target.name}: ${JSON.stringify(measured)}`)
      }
    }
    for (const target of targets) if (target.child !== undefined) await stop(target.child)
  } finally {
    await finishBench(setup)
  }
  return { runs, setup, begun, loadAtStart }
}
