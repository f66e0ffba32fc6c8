// Does this checkout's grant.lua do exactly what a baseline's does? Both run in the simulator's Redis (the reference Lua
// in wasmoon, test/helpers/sim/redis-model.ts), each on a keyspace of its own at one clock, fed the same random calls —
// several holders and keys, entries of every kind (reads, writes, bans, month quotas hard and soft, waited requests,
// blocks held, adjustments and outage write-backs, duplicate keys in a call) at steps of time from none to months —
// and after every call the replies and the whole keyspaces (every field's text, every expiry) must be identical.
// A script change meant to cost less, not to behave otherwise, is checked by it before the simulation families.
//   node --import ./src/ts-resolve.ts bench/grant-equivalence.ts   (GRANT_EQ_BASELINE a git ref, default main;
//   GRANT_EQ_SEEDS 200, GRANT_EQ_STEPS 300 calls per seed)
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { GRANT } from '../src/gateway/limiter/redis/scripts.js'
import type { Script } from '../src/gateway/limiter/redis/port.js'
import { createLuaVm, SimRedis } from '../test/helpers/sim/redis-model.js'
import type { World } from '../test/helpers/sim/world.js'
import { REPO_ROOT } from './lib/processes.js'

const BASELINE = process.env.GRANT_EQ_BASELINE ?? 'main'
const SEEDS = Number(process.env.GRANT_EQ_SEEDS ?? 200)
const STEPS = Number(process.env.GRANT_EQ_STEPS ?? 300)
const KEYS = ['rl:{a}', 'rl:{b}', 'rl:{c}']
const HOLDERS = ['h1', 'h2', 'h3']
/** Steps of time between calls (ms): none, within a second, seconds, past the minute, a day bucket, a day, months. */
const STEPS_MS = [0, 0, 1, 37, 250, 999, 1000, 2500, 61_000, 900_000, 86_400_000, 40 * 86_400_000]

/** A seeded generator (mulberry32). */
function generator (seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let mixed = Math.imul(state ^ (state >>> 15), 1 | state)
    mixed = (mixed + Math.imul(mixed ^ (mixed >>> 7), 61 | mixed)) ^ mixed
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 4294967296
  }
}

function main (): void {
  const baselineLua = execFileSync('git', ['show', `${BASELINE}:src/gateway/limiter/lua/grant.lua`], { cwd: REPO_ROOT, encoding: 'utf8' })
  const before: Script = { name: 'grant', lua: baselineLua, sha: createHash('sha1').update(baselineLua).digest('hex') }
  if (before.sha === GRANT.sha) process.stderr.write('grant-equivalence: the two scripts are the same text\n')
  let calls = 0
  let entries = 0
  let refusals = 0
  let bans = 0
  return void (async () => {
    const vm = await createLuaVm()
    for (let seed = 1; seed <= SEEDS; seed++) {
      const random = generator(seed)
      const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!
      const int = (low: number, high: number): number => low + Math.floor(random() * (high - low + 1))
      const world = { now: Date.UTC(2026, 10, 29, 23, 59, 0) + int(0, 120_000) } as unknown as World
      const old = new SimRedis(world, 0, vm)
      const now = new SimRedis(world, 0, vm)
      for (let step = 0; step < STEPS; step++) {
        world.now += pick(STEPS_MS) + (random() < 0.5 ? int(0, 999) : 0)
        const minute = Math.floor(world.now / 1000)
        const day = Math.floor(world.now / 900_000)
        const count = pick([1, 1, 1, 2, 3])
        const keys: string[] = []
        const args: string[] = [pick(HOLDERS)]
        for (let index = 0; index < count; index++) {
          const key = pick(KEYS)
          keys.push(key, `${key}:d`)
          const write = random() < 0.9 ? 1 : 0
          const ownBucket = random() < 0.5 ? 0 : minute - int(0, 4)
          const waited = random() < 0.8 ? 0 : minute - int(0, 4)
          args.push([pick([3, 10, 40]), pick([30, 200, 100_000]), pick([0, 0, 50, 5000]), int(0, 5), pick([1, 1, 2, 5]),
            int(0, 6), pick([0, 0, 4, 12]), write, random() < 0.2 ? 1 : 0, ownBucket, int(0, 4), waited].join(' '))
          args.push(random() < 0.6 ? pick(['3,60000,5000,40000', '1,10000,1000,1000']) : '')
          const adjustments: string[] = []
          if (random() < 0.3) {
            for (let adjustment = int(1, 2); adjustment > 0; adjustment--) {
              adjustments.push(`${random() < 0.1 ? 0 : minute - int(0, 70)},${day - int(0, 100)},${random() < 0.5 ? 0 : pick([0, 24323, 24322, 24324])},${int(-6, 6)}${random() < 0.2 ? 'a' : ''}`)
            }
          }
          args.push(adjustments.join(';'))
        }
        const replyOld = JSON.stringify(old.runScript(before, keys, args))
        const replyNew = JSON.stringify(now.runScript(GRANT, keys, args))
        calls++
        entries += count
        const values = JSON.parse(replyNew) as number[]
        for (let at = 1; at < values.length; at += 17) {
          if (values[at] === 1) refusals++
          if (values[at] === 2) bans++
        }
        if (replyOld !== replyNew) throw new Error(`seed ${seed} step ${step}: replies differ\n  keys ${keys.join(' ')}\n  args ${JSON.stringify(args)}\n  before ${replyOld}\n  after  ${replyNew}`)
        const dumpOld = old.dump()
        const dumpNew = now.dump()
        if (dumpOld !== dumpNew) throw new Error(`seed ${seed} step ${step}: keyspaces differ\n  args ${JSON.stringify(args)}\n--- before\n${dumpOld}\n--- after\n${dumpNew}`)
      }
    }
    process.stdout.write(`grant-equivalence: ${calls} calls, ${entries} entries (${refusals} refused, ${bans} banned): replies and keyspaces identical (baseline ${BASELINE})\n`)
  })().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`)
    process.exitCode = 1
  })
}

main()
