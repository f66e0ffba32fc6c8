// What grant.lua's own Lua costs per call, with nothing else in the measurement: recorded grant calls (ZIPF_CALLS_RECORD
// of bench/zipf-calls.ts, as bench/grant-replay.ts takes them) run by the stand-alone Lua 5.1 interpreter — the
// version Redis embeds — against a hash store written in Lua, each call at its recorded clock. Redis's command path,
// its socket and its event loop are the same for two variants that send the same commands with the same arguments, so
// what differs between two such scripts here is what differs in Redis: the tables, closures and arithmetic the script
// runs per call (the replay cannot resolve below ~2 µs a call). Between scripts whose commands differ (another layout,
// numbers handed to redis.call, which Redis prints in C) it says nothing: the store here is Lua, so use the replay.
// CPU time from os.clock(), all variants in one process pinned to one core, interleaved every CHUNK calls; a round is
// one such process; medians of the rounds and of their paired differences.
//   node --import ./src/ts-resolve.ts bench/grant-lua51.ts CHECKOUT=CALLS.json [CHECKOUT=CALLS.json …]
//   GRANT_LUA51_ROUNDS (default 9), GRANT_LUA51_REPEAT (passes over the calls per round, default 5). Needs lua5.1
//   (apt-get install -y lua5.1) and taskset. CHECKOUT is the root whose src/gateway/limiter/lua/grant.lua runs.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { median } from './lib/load.js'
import { readRecordedCalls, type RecordedCall } from './lib/recorded-calls.js'


/** A Lua long string holding `text` as it is (a level of '=' that the text does not contain). */
function luaString (text: string): string {
  let level = ''
  while (text.includes(`]${level}]`)) level += '='
  return `[${level}[${text.startsWith('\n') ? '\n' : ''}${text}]${level}]`
}

/** The recorded calls as a Lua chunk returning { { at, keys, args }, … }. */
function callsChunk (calls: readonly RecordedCall[]): string {
  const list = (values: readonly string[]): string => `{${values.map(luaString).join(',')}}`
  return `return {\n${calls.map((call) => `{${call.at},${list(call.keys)},${list(call.args)}}`).join(',\n')}\n}\n`
}

// The harness: Redis's Lua surroundings for each script (KEYS, ARGV, redis.call on a hash store of its own, TIME at the
// recorded clock), each script compiled once as Redis does, then every variant runs the same stretch of CHUNK calls in
// turn (the order reversed every other stretch), so a change in the machine's speed falls on all of them alike;
// prints each variant's CPU seconds.
const HARNESS = `
local CHUNK = 50
local repeat_count, variant_count = tonumber(arg[1]), (#arg - 1) / 2
local store, clock_ms = nil, 0
local function text (value) return type(value) == 'number' and string.format('%.17g', value) or value end
local commands = {
  TIME = function () return { string.format('%d', math.floor(clock_ms / 1000)), string.format('%d', (clock_ms % 1000) * 1000) } end,
  HMGET = function (key, ...)
    local hash, out = store[key] or {}, {}
    for position = 1, select('#', ...) do local value = hash[select(position, ...)]; out[position] = value == nil and false or value end
    return out
  end,
  HGET = function (key, field) local value = (store[key] or {})[field]; if value == nil then return false end; return value end,
  HSET = function (key, ...)
    local hash = store[key]; if not hash then hash = {}; store[key] = hash end
    for position = 1, select('#', ...), 2 do hash[select(position, ...)] = text(select(position + 1, ...)) end
    return 0
  end,
  PEXPIREAT = function () return 1 end
}
redis = { call = function (name, ...) return assert(commands[name], name)(...) end }
local variants = {}
for index = 1, variant_count do
  local handle = assert(io.open(arg[2 * index])); local body = assert(loadstring(handle:read('*a'), '@grant')); handle:close()
  variants[index] = { body = body, calls = dofile(arg[2 * index + 1]), seconds = 0 }
end
local function run (variant, from, to)
  store = variant.store
  local started = os.clock()
  for index = from, to do
    local call = variant.calls[index]
    clock_ms, KEYS, ARGV = call[1], call[2], call[3]
    variant.body()
  end
  variant.seconds = variant.seconds + os.clock() - started
end
local total, stretch = #variants[1].calls, 0
for pass = 1, repeat_count do
  for _, variant in ipairs(variants) do variant.store = {} end
  for from = 1, total, CHUNK do
    stretch = stretch + 1
    local to = math.min(total, from + CHUNK - 1)
    if stretch % 2 == 1 then for index = 1, variant_count do run(variants[index], from, to) end
    else for index = variant_count, 1, -1 do run(variants[index], from, to) end end
  end
end
for _, variant in ipairs(variants) do print(variant.seconds) end
`

const variants = process.argv.slice(2).map((spec) => {
  const [root, callsPath] = spec.split('=') as [string, string]
  return { spec, script: join(root, 'src/gateway/limiter/lua/grant.lua'), calls: readRecordedCalls(callsPath) }
})
if (variants.length === 0) throw new Error('usage: grant-lua51.ts CHECKOUT=CALLS.json [CHECKOUT=CALLS.json …]')
if (variants.some((variant) => variant.calls.length !== variants[0]!.calls.length)) throw new Error('every calls file must hold as many calls (the same recording, or one converted)')
const rounds = Number(process.env.GRANT_LUA51_ROUNDS ?? 9)
const repeatCount = Number(process.env.GRANT_LUA51_REPEAT ?? 5)
const directory = mkdtempSync(join(tmpdir(), 'grant-lua51-'))
const harness = join(directory, 'harness.lua')
writeFileSync(harness, HARNESS)
const files = variants.map((variant, index) => {
  const file = join(directory, `calls-${index}.lua`)
  writeFileSync(file, callsChunk(variant.calls))
  return file
})

const perCall: number[][] = variants.map(() => [])
const harnessArgs = variants.flatMap((variant, index) => [variant.script, files[index]!])
for (let round = 0; round < rounds; round++) {
  const seconds = execFileSync('taskset', ['-c', '1', 'lua5.1', harness, String(repeatCount), ...harnessArgs], { encoding: 'utf8' }).trim().split('\n').map(Number)
  seconds.forEach((value, index) => perCall[index]!.push(value * 1e6 / (variants[index]!.calls.length * repeatCount)))
}
console.log(`grant.lua under lua5.1 on recorded calls, ${rounds} rounds × ${repeatCount} passes; load average ${loadavg().map((value) => value.toFixed(2)).join(' ')}`)
console.log('| checkout=calls | calls | µs per call, median | rounds (µs per call) |')
console.log('|---|---:|---:|---|')
variants.forEach((variant, index) => console.log(`| ${variant.spec} | ${variant.calls.length} | ${median(perCall[index]!).toFixed(2)} | ${perCall[index]!.map((value) => value.toFixed(2)).join(' ')} |`))
for (let index = 1; index < variants.length; index++) {
  const differences = perCall[index]!.map((value, round) => value - perCall[0]![round]!)
  const lower = differences.filter((difference) => difference < 0).length
  console.log(`${variants[index]!.spec} less ${variants[0]!.spec}: paired median ${median(differences).toFixed(2)} µs per call (lower in ${lower} of ${rounds} rounds)`)
}
