// Preloaded (`--import`) into a simulator test file by bench/sim-digest.ts: it wraps the simulator's entry
// points of a checkout (SIM_DIGEST_ROOT) — World.at, every event scheduled and then run; SimRedis.runScript,
// every script with its keys, arguments, Redis time and reply; World.run's end, every process's admissions
// (instant, Redis's instant, cost, how granted), refusals and answer counts so far — and hashes what passes
// through them in order. At exit it prints one `# sim-digest` line: two checkouts that print the same digest
// for the same file and seeds scheduled the same events, ran them in the same order at the same virtual
// instants, sent Redis the same calls with the same replies, and answered every request the same way at the
// same instant. A check of the simulator's speed work, not a test.
import { createHash } from 'node:crypto'
import { writeSync } from 'node:fs'
import { pathToFileURL } from 'node:url'

interface WorldLike { now: number, at: (t: number, fn: () => void, owner?: unknown, phase?: number) => () => void, run: (until: number) => Promise<void> }
interface ProcessLike { world: WorldLike, name: string, admissions: unknown[], refusals: unknown[], outcomes: Map<string, number>, waiting: number, longestWait: number, longestUnblockedWait: number, request: (id: string, ask: unknown) => void }
interface RedisLike { time: () => number, runScript: (script: { sha: string }, keys: readonly string[], args: readonly string[]) => unknown }

const root = process.env.SIM_DIGEST_ROOT ?? process.cwd()
const { World } = await import(pathToFileURL(`${root}/test/helpers/sim/world.ts`).href) as { World: { prototype: WorldLike } }
const { SimRedis } = await import(pathToFileURL(`${root}/test/helpers/sim/redis-model.ts`).href) as { SimRedis: { prototype: RedisLike } }

const { SimProcess } = await import(pathToFileURL(`${root}/test/helpers/sim/process.ts`).href) as { SimProcess: { prototype: ProcessLike } }

const hash = createHash('sha256')
const tally = { scheduled: 0, ran: 0, scripts: 0 }

const at = World.prototype.at
World.prototype.at = function (this: WorldLike, t, fn, owner, phase) {
  const id = tally.scheduled++
  hash.update(`a${id}@${t}/${phase ?? '-'}/${owner === undefined ? 0 : 1};`)
  return at.call(this, t, () => {
    tally.ran++
    hash.update(`r${id}@${this.now};`)
    fn()
  }, owner, phase)
}

// The processes that took a request: at the end of each World.run, what its processes answered so far.
const processes = new Set<ProcessLike>()
const request = SimProcess.prototype.request
SimProcess.prototype.request = function (this: ProcessLike, id, ask) {
  processes.add(this)
  request.call(this, id, ask)
}
const run = World.prototype.run
World.prototype.run = async function (this: WorldLike, until) {
  await run.call(this, until)
  for (const p of processes) {
    if (p.world !== this) { processes.delete(p); continue }
    hash.update(`p${p.name}:${JSON.stringify(p.admissions)}|${JSON.stringify(p.refusals)}|${JSON.stringify([...p.outcomes])}|${p.waiting},${p.longestWait},${p.longestUnblockedWait};`)
  }
}

const runScript = SimRedis.prototype.runScript
SimRedis.prototype.runScript = function (this: RedisLike, script, keys, args) {
  tally.scripts++
  const time = this.time()
  let reply: unknown
  try {
    reply = runScript.call(this, script, keys, args)
  } catch (err) {
    hash.update(`s${script.sha}@${time}|${keys.join(',')}|${args.join(',')}|!${(err as Error).message};`)
    throw err
  }
  hash.update(`s${script.sha}@${time}|${keys.join(',')}|${args.join(',')}|${JSON.stringify(reply)};`)
  return reply
}

process.on('exit', () => {
  writeSync(1, `# sim-digest ${hash.digest('hex')} scheduled=${tally.scheduled} ran=${tally.ran} scripts=${tally.scripts}\n`)
})
