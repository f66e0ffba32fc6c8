// Preloaded (`--import`) into a simulator test file by bench/sim-digest.ts: it wraps the simulator's two
// entry points of a checkout (SIM_DIGEST_ROOT) — World.at, every event scheduled and then run, and
// SimRedis.runScript, every script with its keys, arguments, Redis time and reply — and hashes what passes
// through them in order. At exit it prints one `# sim-digest` line: two checkouts that print the same digest
// for the same file and seeds scheduled the same events, ran them in the same order at the same virtual
// instants, and sent Redis the same calls with the same replies. A check of the simulator's speed work, not a test.
import { createHash } from 'node:crypto'
import { writeSync } from 'node:fs'
import { pathToFileURL } from 'node:url'

interface WorldLike { now: number, at: (t: number, fn: () => void, owner?: unknown, phase?: number) => () => void }
interface RedisLike { time: () => number, runScript: (script: { sha: string }, keys: readonly string[], args: readonly string[]) => unknown }

const root = process.env.SIM_DIGEST_ROOT ?? process.cwd()
const { World } = await import(pathToFileURL(`${root}/test/helpers/sim/world.ts`).href) as { World: { prototype: WorldLike } }
const { SimRedis } = await import(pathToFileURL(`${root}/test/helpers/sim/redis-model.ts`).href) as { SimRedis: { prototype: RedisLike } }

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
