// Script calls per request on the Zipf workload through the real gateways: this checkout's and others'
// (BENCH_BASELINE, a comma list of checkouts — `git archive` of an older commit, or a hybrid — with node_modules), each
// on a redis-server of its own, pinned to CPU 0 as bench/run.ts pins them, driven in turn (the order reversed every
// other round) by the same Zipf sequence (bench/lib/workloads.ts) in a closed loop (wrk, 50 connections, as
// `npm run bench`) and, with ZIPF_CALLS_DELAY_MS > 0, paced too (wrk, each connection waiting that long after an
// answer before its next request: the same arrivals for a faster or a slower gateway while both keep up), and with
// ZIPF_CALLS_RATE > 0 at that fixed rate (autocannon in this process: on a loaded machine it falls short of the rate). Per round and gateway: EVALSHA ÷ requests answered (INFO commandstats deltas on
// its own Redis) and req/s. bench/zipf-calls.ts is the same count on the store alone, load-proof.
//   BENCH_BASELINE=/tmp/outage-bl node --import ./src/ts-resolve.ts bench/zipf-calls-gateway.ts
//   ZIPF_CALLS_ROUNDS (3), ZIPF_CALLS_SECONDS (2 per run), ZIPF_CALLS_DELAY_MS (0), ZIPF_CALLS_RATE (0)
import { resolve } from 'node:path'
import { buildWorkloads } from './lib/workloads.js'
import { closedLoop, fixedRate, type Run } from './lib/load.js'
import { luaScript, wrkWithScript } from './lib/wrk.js'
import { commandCalls, startRedis, type RedisServer } from './lib/processes.js'
import { finishBench, prepareBench, REST_CPUS, startGateway, type Target } from './lib/targets.js'
import { CONFIG_KEYS } from './lib/workloads.js'
import { median } from './lib/load.js'

interface Row { gateway: string, mode: string, requests: number, evalsha: number, reqPerSecond: number, non2xx: number }


async function main (): Promise<void> {
  const baseline = process.env.BENCH_BASELINE
  if (baseline === undefined || baseline === '') throw new Error('BENCH_BASELINE: the baseline checkout')
  const rounds = Number(process.env.ZIPF_CALLS_ROUNDS ?? 3)
  const seconds = Number(process.env.ZIPF_CALLS_SECONDS ?? 2)
  const rate = Number(process.env.ZIPF_CALLS_RATE ?? 0)
  const delayMs = Number(process.env.ZIPF_CALLS_DELAY_MS ?? 0)
  const paced = `wrk, ${delayMs} ms between an answer and the next request`
  const modes = ['closed loop', ...(delayMs > 0 ? [paced] : []), ...(rate > 0 ? [`${rate} req/s`] : [])]
  const setup = await prepareBench('zipf-calls', CONFIG_KEYS)
  try {
    const zipf = buildWorkloads(new Set(['zipf']))[0]!
    const gateways: Array<{ target: Target, redis: RedisServer }> = []
    const roots: Array<[string, string | undefined]> = [['this checkout', undefined], ...baseline.split(',').map((dir): [string, string] => [resolve(dir), resolve(dir)])]
    for (const [name, root] of roots) {
      const redis = await startRedis(setup.work)
      const target = await startGateway(name, { configDir: setup.configDir, backendUrl: setup.backendUrl, redisUrl: redis.url, cpus: setup.serverCpus, ...(root === undefined ? {} : { root }) })
      gateways.push({ target, redis })
    }
    const rows: Row[] = []
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? gateways : [...gateways].reverse()
      for (const mode of modes) {
        for (const { target, redis } of order) {
          const before = await commandCalls(redis)
          const options = { url: `${target.url}/v1/pets?limit=10`, seconds, connections: 50, tokens: zipf.tokens, order: zipf.order }
          const run: Run = mode === 'closed loop'
            ? await closedLoop(options)
            : mode === paced
              ? await wrkWithScript(options.url, seconds, { script: `${luaScript(zipf.tokens, zipf.order)}delay = function() return ${delayMs} end\n`, connections: 50, cpus: REST_CPUS, tmpPrefix: 'zipf-calls-wrk-' })
              : await fixedRate({ ...options, rate })
          await new Promise((done) => setTimeout(done, 100))
          const after = await commandCalls(redis)
          const evalsha = (after.calls.get('evalsha') ?? 0) - (before.calls.get('evalsha') ?? 0)
          const row = { gateway: target.name, mode, requests: run.total, evalsha, reqPerSecond: run.requestsPerSecond, non2xx: run.non2xx + run.errors }
          rows.push(row)
          process.stderr.write(`round ${round + 1}: ${JSON.stringify(row)}\n`)
        }
      }
    }
    console.log(`Zipf s = 1.1, 50 connections, ${seconds} s a run, ${rounds} rounds alternating; per round EVALSHA ÷ requests, then the median`)
    console.log('| gateway | load | req/s, per round | EVALSHA per request, per round | median | non-2xx + errors |')
    console.log('|---|---|---|---|---:|---:|')
    for (const mode of modes) {
      for (const { target } of gateways) {
        const mine = rows.filter((row) => row.gateway === target.name && row.mode === mode)
        const perRound = mine.map((row) => row.evalsha / Math.max(1, row.requests))
        console.log(`| ${target.name} | ${mode} | ${mine.map((row) => row.reqPerSecond.toFixed(0)).join(' / ')} | ${perRound.map((value) => value.toFixed(3)).join(' / ')} | ${median(perRound).toFixed(3)} | ${mine.reduce((sum, row) => sum + row.non2xx, 0)} |`)
      }
    }
  } finally {
    await finishBench(setup)
  }
}

await main()
