// Script calls per decision on the Zipf workload on a virtual clock, where machine load cannot move them at all: the
// real redis/ code of this checkout and of a baseline (BENCH_BASELINE) in the fault simulator (test/helpers/sim/, each
// checkout's own: the real grant.lua in the modelled Redis), one gateway process, no fault, driven by the same Zipf
// sequence (bench/lib/zipf.ts, seed 21) from closed-loop clients. The process is modelled as Node runs it: a turn
// reads every request that arrived since the last one, spends a fixed CPU time on each (the gateway's work around the
// limiter), then its check phase sends the turn's grant calls; a client's next request arrives a fixed time after its
// answer (the proxied backend call and the client). Same inputs, same counts, every run.
//   BENCH_BASELINE=/tmp/outage-bl node --import ./src/ts-resolve.ts bench/zipf-calls-sim.ts
//   ZIPF_SIM_SECONDS (virtual, default 20), ZIPF_SIM_CLIENTS (50), ZIPF_SIM_SERVICE_US (CPU per request, 300),
//   ZIPF_SIM_BACKEND_MS (answer → next request, 2), ZIPF_SIM_NET_MS (one-way to Redis, 0.1)
import { existsSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { DEFAULT_ZIPF_CONSUMERS, DEFAULT_ZIPF_EXPONENT, DEFAULT_ZIPF_SEED, DEFAULT_ZIPF_SEQUENCE_LENGTH, zipfSequence } from './lib/zipf.js'

export const HERE = resolve(import.meta.dirname, '..')
const LIMITS = { perMinute: 1_000_000_000, perDay: 1_000_000_000_000 }
const START = Date.UTC(2030, 4, 6, 10, 0, 0)

export interface Settings { seconds: number, clients: number, serviceMs: number, backendMs: number, netMs: number }
export interface Counted { decisions: number, scripts: number, turns: number, virtualSeconds: number, entries: number, asking: number, settling: number, reserveOnly: number, handBacks: number, withoutRequests: number }

interface SimModules {
  World: new (seed: number, start: number) => { now: number, at: (t: number, fn: () => void, owner?: unknown, phase?: number) => () => void, run: (until: number) => Promise<void> }
  SimRedis: new (world: unknown, skew: number, vm: unknown) => { scripts: number, set: (key: string, value: string) => void, runScript: (script: unknown, keys: readonly string[], args: readonly string[]) => unknown }
  SimProcess: new (world: unknown, redisOrTopology: unknown, name: string, opts: Record<string, unknown>) => { busyUntil: number, grants: { consume: (id: string, ask: unknown) => Promise<{ outcome: string }>, settled: (ms: number) => Promise<void> } }
  createLuaVm: () => Promise<unknown>
  singleRedis?: (redis: unknown) => unknown
}

async function load (root: string): Promise<SimModules> {
  const sim = join(root, 'test/helpers/sim')
  const world = await import(join(sim, 'world.ts')) as Pick<SimModules, 'World'>
  const model = await import(join(sim, 'redis-model.ts')) as Pick<SimModules, 'SimRedis' | 'createLuaVm'>
  const process = await import(join(sim, 'process.ts')) as Pick<SimModules, 'SimProcess'>
  const topology = existsSync(join(sim, 'topology.ts')) ? await import(join(sim, 'topology.ts')) as Pick<SimModules, 'singleRedis'> : {}
  return { ...world, ...model, ...process, ...topology }
}

/** What `root`'s limiter sends Redis for `order` (one consumer index per request) under `settings`. */
export async function count (root: string, settings: Settings, order: readonly number[]): Promise<Counted> {
  const modules = await load(root)
  const world = new modules.World(1, START - 5_000)
  const redis = new modules.SimRedis(world, 0, await modules.createLuaVm())
  redis.set('rl:{#epoch}', 'deployed,0')
  const net = { base: settings.netMs, jitter: 0, slowChance: 0, slowMs: 0 }
  const processOptions = { policy: 'local', allowance: { share: 0.1, processes: 1 }, timeoutMs: 250, barrierMs: 2_000, offset: 0, drift: 0, net }
  const gateway = new modules.SimProcess(world, modules.singleRedis === undefined ? redis : modules.singleRedis(redis), 'p0', processOptions)
  void gateway.grants.settled(0)
  await world.run(START - 1_000)
  const scriptsBefore = redis.scripts
  // Each grant call's entries by what they carry: requests, only settlements (give-backs, write-backs), only a reserve
  // (handed back to 0, or lowered).
  const kinds = { entries: 0, asking: 0, settling: 0, reserveOnly: 0, handBacks: 0, withoutRequests: 0 }
  const runScript = redis.runScript.bind(redis)
  redis.runScript = (script, keys, args) => {
    if (keys.length > 1) {
      let asking = 0
      for (let position = 1; position < args.length; position += 3) {
        kinds.entries++
        const fields = args[position]!.split(' ')
        if (Number(fields[3]) > 0) { kinds.asking++; asking++ } else if (args[position + 2] !== '') kinds.settling++
        else { kinds.reserveOnly++; if (Number(fields[6]) === 0) kinds.handBacks++ }
      }
      if (asking === 0) kinds.withoutRequests++
    }
    return runScript(script, keys, args)
  }
  const ask = { limits: LIMITS, ban: null, cost: 1, monthLimit: 0, overage: true }
  const end = START + settings.seconds * 1000
  const arrived: Array<() => void> = []
  let nextIndex = 0
  let decisions = 0
  let turns = 0
  let loopScheduled = false

  /** One turn of the gateway's loop: every request arrived since the last is read, each costs serviceMs of CPU. */
  function turn (): void {
    loopScheduled = false
    const batch = arrived.splice(0)
    if (batch.length === 0) return
    turns++
    for (const send of batch) send()
    // The check phase (the grant calls' flush) runs once the turn's CPU is spent: the simulator defers it to busyUntil.
    gateway.busyUntil = world.now + batch.length * settings.serviceMs
  }
  function arrive (send: () => void): void {
    arrived.push(send)
    if (loopScheduled) return
    loopScheduled = true
    world.at(world.now, turn, gateway, 1)
  }
  function client (): void {
    if (world.now >= end || nextIndex >= order.length) return
    const id = `key-${order[nextIndex++]!}`
    arrive(() => {
      void gateway.grants.consume(id, ask).then((result) => {
        if (result.outcome !== 'ok') throw new Error(`unexpected ${result.outcome}`)
        decisions++
        world.at(world.now + settings.backendMs, client)
      })
    })
  }
  for (let index = 0; index < settings.clients; index++) world.at(START + index * settings.backendMs / settings.clients, client)
  await world.run(end + 5_000)
  return { decisions, scripts: redis.scripts - scriptsBefore, turns, virtualSeconds: settings.seconds, ...kinds }
}

async function main (): Promise<void> {
  const settings: Settings = {
    seconds: Number(process.env.ZIPF_SIM_SECONDS ?? 20),
    clients: Number(process.env.ZIPF_SIM_CLIENTS ?? 50),
    serviceMs: Number(process.env.ZIPF_SIM_SERVICE_US ?? 300) / 1000,
    backendMs: Number(process.env.ZIPF_SIM_BACKEND_MS ?? 2),
    netMs: Number(process.env.ZIPF_SIM_NET_MS ?? 0.1)
  }
  const order = zipfSequence({ consumers: DEFAULT_ZIPF_CONSUMERS, exponent: DEFAULT_ZIPF_EXPONENT, length: DEFAULT_ZIPF_SEQUENCE_LENGTH, seed: DEFAULT_ZIPF_SEED })
  const roots = [HERE, ...(process.env.BENCH_BASELINE ?? '').split(',').filter((dir) => dir !== '').map((dir) => resolve(dir))]
  console.log(`Zipf s = ${DEFAULT_ZIPF_EXPONENT} (seed ${DEFAULT_ZIPF_SEED}) on a virtual clock: ${settings.clients} closed-loop clients, ${settings.serviceMs * 1000} µs of CPU per request, ${settings.backendMs} ms from an answer to the next request, ${settings.netMs} ms each way to Redis, ${settings.seconds} s`)
  console.log('| checkout | decisions | req/s (virtual) | script calls | per decision | decisions per call | loop turns | entries | asking | settling only | reserve only (of which to 0) | calls with no request |')
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
  for (const root of roots) {
    const counted = await count(root, settings, order)
    console.log(`| ${root} | ${counted.decisions} | ${(counted.decisions / counted.virtualSeconds).toFixed(0)} | ${counted.scripts} | ${(counted.scripts / counted.decisions).toFixed(4)} | ${(counted.decisions / counted.scripts).toFixed(2)} | ${counted.turns} | ${counted.entries} | ${counted.asking} | ${counted.settling} | ${counted.reserveOnly} (${counted.handBacks}) | ${counted.withoutRequests} |`)
  }
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) await main()
