// Where grant.lua spends its instructions on real traffic: the grant calls a bench recorded (ZIPF_CALLS_RECORD of
// bench/zipf-calls.ts: the gateway's own store on the Zipf workload) replayed in the simulator's Redis (the reference Lua
// in wasmoon, test/helpers/sim/redis-model.ts) at their recorded times, with a count hook that samples the line running
// every SAMPLE_EVERY virtual-machine instructions. Lines are grant.lua's (the model's own Lua, its HMGET, HSET…, is counted
// apart): redis-server runs the same script in Lua 5.1, so where the instructions go is where its CPU goes, except in C
// functions (string.format, table.concat, the commands themselves), which a count hook does not see.
//   ZIPF_CALLS_RECORD=/tmp/calls.json ZIPF_CALLS_ROUNDS=1 node --import ./src/ts-resolve.ts bench/zipf-calls.ts
//   node --import ./src/ts-resolve.ts bench/grant-lua-profile.ts /tmp/calls.json [top lines, default 40]
//   GRANT_PROFILE_SCRIPT: another grant.lua to replay (a baseline's, with calls recorded from the baseline's store)
import { readFileSync } from 'node:fs'
import { GRANT } from '../src/gateway/limiter/redis/scripts.js'
import { createLuaVm, SimRedis } from '../test/helpers/sim/redis-model.js'
import type { World } from '../test/helpers/sim/world.js'
import { readRecordedCalls } from './lib/recorded-calls.js'

const SAMPLE_EVERY = 100
/** define() prefixes every script with two lines (KEYS/ARGV, unpack). */
const PREFIX_LINES = 2

const HOOK = `
PROFILE = {}
debug.sethook(function ()
  local info = debug.getinfo(2, 'Sl')
  if info ~= nil then
    local where = info.short_src .. ':' .. tostring(info.currentline)
    PROFILE[where] = (PROFILE[where] or 0) + 1
  end
end, '', ${SAMPLE_EVERY})
return 'ok'`
const DUMP = `
debug.sethook()
local out = {}
for where, count in pairs(PROFILE) do out[#out + 1] = where .. '=' .. count end
return table.concat(out, '\\n')`

async function main (): Promise<void> {
  const [file, topArg] = process.argv.slice(2)
  if (file === undefined) throw new Error('usage: grant-lua-profile.ts RECORDED.json [top]')
  const calls = readRecordedCalls(file)
  const world = { now: calls[0]?.at ?? 0 } as unknown as World
  const otherScript = process.env.GRANT_PROFILE_SCRIPT
  const grant = otherScript === undefined ? GRANT : { name: 'grant', lua: readFileSync(otherScript, 'utf8'), sha: 'grant-baseline' }
  const vm = await createLuaVm()
  const redis = new SimRedis(world, 0, vm)
  const script = (name: string, lua: string): { name: string, lua: string, sha: string } => ({ name, lua, sha: name })
  redis.runScript(script('profile-on', HOOK), [], [])
  for (const call of calls) {
    (world as { now: number }).now = call.at
    redis.runScript(grant, call.keys, call.args)
  }
  const samples = String(redis.runScript(script('profile-dump', DUMP), [], [])).split('\n').map((line) => {
    const [where, count] = line.split('=')
    return { where: where!, count: Number(count) }
  })
  const total = samples.reduce((sum, sample) => sum + sample.count, 0)
  const source = grant.lua.split('\n')
  const grantLine = (where: string): number | undefined => where.startsWith(`[string "${grant.sha}"]:`) ? Number(where.split(':').pop()) - PREFIX_LINES : undefined
  let inGrant = 0
  for (const sample of samples) if (grantLine(sample.where) !== undefined) inGrant += sample.count
  console.log(`${calls.length} calls replayed; ${total} samples (one every ${SAMPLE_EVERY} instructions, ${(total * SAMPLE_EVERY / Math.max(1, calls.length)).toFixed(0)} instructions a call); grant.lua ${(100 * inGrant / total).toFixed(1)} %, the model's commands the rest`)
  // By function: the nearest `local function NAME` / `function NAME` above each line.
  const owner = (line: number): string => {
    for (let at = line; at >= 1; at--) {
      const match = /^\s*(?:local\s+)?function\s+([\w.:]+)/.exec(source[at - 1] ?? '')
      if (match !== null) return match[1]!
    }
    return '(main chunk)'
  }
  const byFunction = new Map<string, number>()
  for (const sample of samples) {
    const line = grantLine(sample.where)
    const name = line === undefined ? `model ${sample.where.replace(/^\[string "([^"]*)"\]/, '$1')}` : owner(line)
    byFunction.set(name, (byFunction.get(name) ?? 0) + sample.count)
  }
  console.log('\n| function (grant.lua, or the model\'s line) | share of instructions |\n|---|---:|')
  for (const [name, count] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`| ${name} | ${(100 * count / total).toFixed(1)} % |`)
  console.log('\n| grant.lua line | share | text |\n|---:|---:|---|')
  const top = samples.filter((sample) => grantLine(sample.where) !== undefined).sort((a, b) => b.count - a.count).slice(0, Number(topArg ?? 40))
  for (const sample of top) {
    const line = grantLine(sample.where)!
    console.log(`| ${line} | ${(100 * sample.count / total).toFixed(1)} % | \`${(source[line - 1] ?? '').trim().slice(0, 110).replaceAll('|', '\\|')}\` |`)
  }
}

await main()
