// Accuracy bench: replays traffic patterns on a virtual clock (deterministic, no sleeping) through
// the stores themselves — the in-process store's consume, and the Redis store's Lua script run in
// an embedded Lua VM (fengari) over an in-memory stand-in for the few Redis commands it calls, whose
// TIME is the virtual clock — a fixed window (Kong OSS, Envoy ratelimit, @fastify/rate-limit) and
// the two-counter estimate (Cloudflare), against an exact per-request log as the ideal.
// Over-admission: most admissions in any rolling window beyond the limit (ours must be 0).
// Under-admission: admissions the ideal makes and the model refuses, in %. Run: npm run bench:accuracy
import { createRequire } from 'node:module'
import { DAY_WINDOW, MINUTE_WINDOW, type WindowSpec } from '../src/gateway/limiter/arithmetic.js'
import { createMemoryStore } from '../src/gateway/limiter/stores/memory.js'
import { redisKeys, SLIDING_WINDOW_LUA } from '../src/gateway/limiter/stores/redis.js'

const MINUTE_LIMIT = 60
const DAY_LIMIT = 1000
const HOUR = 3_600_000
const START = Date.UTC(2030, 0, 1) + 12_345

type Admit = (t: number) => boolean | Promise<boolean>

interface Model { name: string, make: (spec: WindowSpec, limit: number) => Admit }

/** The only fengari calls the harness makes (it ships no types). */
interface LuaState { readonly __lua: unique symbol }
interface Fengari {
  lua: {
    lua_gettop: (L: LuaState) => number
    lua_type: (L: LuaState, i: number) => number
    lua_tonumber: (L: LuaState, i: number) => number
    lua_tojsstring: (L: LuaState, i: number) => string
    lua_pushstring: (L: LuaState, s: string) => void
    lua_pushinteger: (L: LuaState, n: number) => void
    lua_pushboolean: (L: LuaState, b: boolean) => void
    lua_createtable: (L: LuaState, narr: number, nrec: number) => void
    lua_rawseti: (L: LuaState, t: number, i: number) => void
    lua_rawgeti: (L: LuaState, t: number, i: number) => number
    lua_rawlen: (L: LuaState, i: number) => number
    lua_pushjsfunction: (L: LuaState, f: (L: LuaState) => number) => void
    lua_setfield: (L: LuaState, t: number, k: string) => void
    lua_setglobal: (L: LuaState, k: string) => void
    lua_pcall: (L: LuaState, nargs: number, nresults: number, handler: number) => number
    lua_pop: (L: LuaState, n: number) => void
    LUA_TNUMBER: number
    LUA_REGISTRYINDEX: number
  }
  lauxlib: {
    luaL_newstate: () => LuaState
    luaL_loadstring: (L: LuaState, code: Uint8Array) => number
    luaL_ref: (L: LuaState, t: number) => number
  }
  lualib: { luaL_openlibs: (L: LuaState) => void }
  to_luastring: (s: string) => Uint8Array
}

/**
 * fengari's Lua integers are 32-bit: its TIME counts from this instant (a whole number of day
 * buckets after the epoch, so every bucket boundary falls where it does in Redis) to stay in range.
 */
const LUA_EPOCH_MS = Date.UTC(2029, 11, 31)

/**
 * The Redis store's script on a virtual clock: a Lua VM with `redis.call` answering TIME from
 * `now()` (minus LUA_EPOCH_MS) and the hash, key and TTL commands the script uses from an in-memory
 * map. Lua 5.3 runs Redis's 5.1 script unchanged but for `unpack`, which is provided.
 */
export function luaScriptRunner (clock: () => number): (keys: string[], args: Array<string | number>) => number[] {
  const now = (): number => {
    const t = clock() - LUA_EPOCH_MS
    if (t < 0 || t > 2 ** 31 - 100 * DAY_WINDOW.bucketMs) throw new Error('the Lua harness clock is out of 32-bit range')
    return t
  }
  const { lua, lauxlib, lualib, to_luastring } = createRequire(import.meta.url)('fengari') as Fengari
  const L = lauxlib.luaL_newstate()
  lualib.luaL_openlibs(L)
  const data = new Map<string, { hash: Map<string, string>, expireAt: number }>()
  const live = (key: string): { hash: Map<string, string>, expireAt: number } | undefined => {
    const entry = data.get(key)
    if (entry !== undefined && entry.expireAt <= now()) { data.delete(key); return undefined }
    return entry
  }
  const hashOf = (key: string): Map<string, string> => {
    let entry = live(key)
    if (entry === undefined) { entry = { hash: new Map(), expireAt: Infinity }; data.set(key, entry) }
    return entry.hash
  }
  const arg = (i: number): string => lua.lua_type(L, i) === lua.LUA_TNUMBER ? String(lua.lua_tonumber(L, i)) : lua.lua_tojsstring(L, i)
  const pushValue = (v: string | undefined): void => { if (v === undefined) lua.lua_pushboolean(L, false); else lua.lua_pushstring(L, v) }
  lua.lua_createtable(L, 0, 1)
  lua.lua_pushjsfunction(L, () => {
    const args = Array.from({ length: lua.lua_gettop(L) }, (_, i) => arg(i + 1))
    const [command, key = '', ...rest] = args
    switch (command!.toUpperCase()) {
      case 'TIME': {
        const t = now()
        lua.lua_createtable(L, 2, 0)
        lua.lua_pushstring(L, String(Math.floor(t / 1000))); lua.lua_rawseti(L, -2, 1)
        lua.lua_pushstring(L, String((t % 1000) * 1000)); lua.lua_rawseti(L, -2, 2)
        return 1
      }
      case 'HMGET': {
        const hash = live(key)?.hash
        lua.lua_createtable(L, rest.length, 0)
        rest.forEach((field, i) => { pushValue(hash?.get(field)); lua.lua_rawseti(L, -2, i + 1) })
        return 1
      }
      case 'HGET': pushValue(live(key)?.hash.get(rest[0]!)); return 1
      case 'HSET': {
        const hash = hashOf(key)
        for (let i = 0; i < rest.length; i += 2) hash.set(rest[i]!, rest[i + 1]!)
        lua.lua_pushinteger(L, 0); return 1
      }
      case 'HDEL': { const hash = live(key)?.hash; for (const f of rest) hash?.delete(f); lua.lua_pushinteger(L, 0); return 1 }
      case 'DEL': { for (const k of [key, ...rest]) data.delete(k); lua.lua_pushinteger(L, 0); return 1 }
      case 'PEXPIRE': { const entry = live(key); if (entry !== undefined) entry.expireAt = now() + Number(rest[0]); lua.lua_pushinteger(L, 1); return 1 }
      case 'PTTL': {
        const entry = live(key)
        lua.lua_pushinteger(L, entry === undefined ? -2 : entry.expireAt === Infinity ? -1 : entry.expireAt - now())
        return 1
      }
      default: throw new Error(`redis.call ${command} is not emulated`)
    }
  })
  lua.lua_setfield(L, -2, 'call')
  lua.lua_setglobal(L, 'redis')
  if (lauxlib.luaL_loadstring(L, to_luastring('local KEYS, ARGV = ...\nlocal unpack = table.unpack\n' + SLIDING_WINDOW_LUA)) !== 0) {
    throw new Error(`script does not compile: ${lua.lua_tojsstring(L, -1)}`)
  }
  const script = lauxlib.luaL_ref(L, lua.LUA_REGISTRYINDEX)
  const pushList = (values: Array<string | number>): void => {
    lua.lua_createtable(L, values.length, 0)
    values.forEach((v, i) => { lua.lua_pushstring(L, String(v)); lua.lua_rawseti(L, -2, i + 1) })
  }
  return (keys, args) => {
    lua.lua_rawgeti(L, lua.LUA_REGISTRYINDEX, script)
    pushList(keys)
    pushList(args)
    if (lua.lua_pcall(L, 2, 1, 0) !== 0) throw new Error(`script failed: ${lua.lua_tojsstring(L, -1)}`)
    const reply: number[] = []
    if (lua.lua_type(L, -1) !== lua.LUA_TNUMBER) {
      for (let i = 1; i <= lua.lua_rawlen(L, -1); i++) { lua.lua_rawgeti(L, -1, i); reply.push(Math.trunc(lua.lua_tonumber(L, -1))); lua.lua_pop(L, 1) }
    }
    lua.lua_pop(L, 1)
    return reply
  }
}

/** Limits that make `spec`'s window the binding one. */
function limitsFor (spec: WindowSpec, limit: number): { perMinute: number, perDay: number } {
  return spec.name === 'minute' ? { perMinute: limit, perDay: 1e9 } : { perMinute: 1e9, perDay: limit }
}

const models: Model[] = [
  {
    name: 'exact log (ideal)',
    make: (spec, limit) => {
      const log: number[] = []
      let head = 0
      return (t) => {
        while (head < log.length && log[head]! <= t - spec.windowMs) head++
        if (log.length - head >= limit) return false
        log.push(t)
        return true
      }
    }
  },
  {
    name: 'ours: in-process store',
    make: (spec, limit) => {
      const clock = { now: 0 }
      const store = createMemoryStore({ now: () => clock.now })
      const limits = limitsFor(spec, limit)
      return async (t) => {
        clock.now = t
        return (await store.consume('replay', limits, null)).outcome === 'ok'
      }
    }
  },
  {
    name: 'ours: Redis script',
    make: (spec, limit) => {
      const clock = { now: 0 }
      const run = luaScriptRunner(() => clock.now)
      const { perMinute, perDay } = limitsFor(spec, limit)
      const keys = redisKeys('replay')
      return (t) => {
        clock.now = t
        return run(keys, ['c', perMinute, perDay, ''])[0] === 0
      }
    }
  },
  {
    name: 'fixed window',
    make: (spec, limit) => {
      let window = -1
      let count = 0
      return (t) => {
        const w = Math.floor(t / spec.windowMs)
        if (w !== window) { window = w; count = 0 }
        if (count >= limit) return false
        count++
        return true
      }
    }
  },
  {
    name: 'two counters',
    make: (spec, limit) => {
      let window = -1
      let current = 0
      let previous = 0
      return (t) => {
        const w = Math.floor(t / spec.windowMs)
        if (w !== window) { previous = w === window + 1 ? current : 0; current = 0; window = w }
        const elapsed = (t - w * spec.windowMs) / spec.windowMs
        if (previous * (1 - elapsed) + current >= limit) return false
        current++
        return true
      }
    }
  }
]

function prng (seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let x = Math.imul(s ^ (s >>> 15), 1 | s)
    x ^= x + Math.imul(x ^ (x >>> 7), 61 | x)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

function poisson (ratePerMs: number, durationMs: number, seed: number): number[] {
  const random = prng(seed)
  const times: number[] = []
  for (let t = START; t < START + durationMs;) {
    t += Math.max(1, Math.round(-Math.log(1 - random()) / ratePerMs))
    times.push(t)
  }
  return times
}

function every (intervalMs: number, durationMs: number): number[] {
  const times: number[] = []
  for (let t = START; t < START + durationMs; t += intervalMs) times.push(t)
  return times
}

/** `size` requests just before and just after each window edge. */
function edgeBursts (spec: WindowSpec, size: number, windows: number): number[] {
  const times: number[] = []
  const first = Math.ceil(START / spec.windowMs) * spec.windowMs
  for (let k = 1; k <= windows; k++) {
    const edge = first + k * spec.windowMs
    for (let i = 0; i < size; i++) times.push(edge - 100 + i % 50)
    for (let i = 0; i < size; i++) times.push(edge + 100 + i % 50)
  }
  return times.sort((a, b) => a - b)
}

interface Pattern { name: string, spec: WindowSpec, limit: number, times: number[] }

/** The replayed patterns; `scale` shortens them (the test replays a quarter: same shapes, fewer windows). */
function patternsAt (scale: number): Pattern[] {
  const hours = 6 * HOUR * scale
  const days = Math.max(3, Math.round(10 * scale)) * 24 * HOUR
  const dayEdges = Math.max(3, Math.round(10 * scale))
  return [
    { name: 'steady at the minute limit', spec: MINUTE_WINDOW, limit: MINUTE_LIMIT, times: every(60_000 / MINUTE_LIMIT, hours) },
    { name: 'steady at 2x the minute limit', spec: MINUTE_WINDOW, limit: MINUTE_LIMIT, times: every(30_000 / MINUTE_LIMIT, hours) },
    { name: 'bursts at minute edges', spec: MINUTE_WINDOW, limit: MINUTE_LIMIT, times: edgeBursts(MINUTE_WINDOW, MINUTE_LIMIT, Math.round(120 * scale)) },
    { name: 'Poisson at the minute limit', spec: MINUTE_WINDOW, limit: MINUTE_LIMIT, times: poisson(MINUTE_LIMIT / 60_000, hours, 1) },
    { name: 'Poisson at 3x the minute limit', spec: MINUTE_WINDOW, limit: MINUTE_LIMIT, times: poisson(3 * MINUTE_LIMIT / 60_000, hours, 2) },
    { name: 'steady at the day limit', spec: DAY_WINDOW, limit: DAY_LIMIT, times: every(86_400_000 / DAY_LIMIT, days) },
    { name: 'bursts at day edges', spec: DAY_WINDOW, limit: DAY_LIMIT, times: edgeBursts(DAY_WINDOW, DAY_LIMIT, dayEdges) },
    { name: 'Poisson at 2x the day limit', spec: DAY_WINDOW, limit: DAY_LIMIT, times: poisson(2 * DAY_LIMIT / 86_400_000, days, 3) }
  ]
}

/** Most admissions in any rolling window (t - w, t]. */
function fullestWindow (admitted: number[], windowMs: number): number {
  let worst = 0
  for (let i = 0, j = 0; i < admitted.length; i++) {
    while (admitted[j]! <= admitted[i]! - windowMs) j++
    worst = Math.max(worst, i - j + 1)
  }
  return worst
}

export interface Row { pattern: string, model: string, offered: number, admitted: number, over: number, underPct: number }

export async function runAccuracy (scale = 1): Promise<Row[]> {
  const rows: Row[] = []
  for (const pattern of patternsAt(scale)) {
    const results: Array<{ model: string, admitted: number[] }> = []
    for (const model of models) {
      const admit = model.make(pattern.spec, pattern.limit)
      const admitted: number[] = []
      for (const t of pattern.times) if (await admit(t)) admitted.push(t)
      results.push({ model: model.name, admitted })
    }
    const ideal = results[0]!.admitted.length
    for (const { model, admitted } of results) {
      rows.push({
        pattern: pattern.name,
        model,
        offered: pattern.times.length,
        admitted: admitted.length,
        over: Math.max(0, fullestWindow(admitted, pattern.spec.windowMs) - pattern.limit),
        underPct: Math.max(0, (ideal - admitted.length) / ideal * 100)
      })
    }
  }
  return rows
}

function table (rows: Row[]): string {
  const header = ['pattern', 'model', 'offered', 'admitted', 'over-admission (max excess in a rolling window)', 'under-admission %']
  const lines = rows.map((r) => [r.pattern, r.model, String(r.offered), String(r.admitted), String(r.over), r.underPct.toFixed(2)])
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)))
  const fmt = (cells: string[]): string => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`
  return [fmt(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...lines.map(fmt)].join('\n')
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const rows = await runAccuracy()
  console.log(`Limits: ${MINUTE_LIMIT}/min (1 s buckets), ${DAY_LIMIT}/day (15 min buckets)\n`)
  console.log(table(rows))
  const ours = rows.filter((r) => r.model.startsWith('ours'))
  const bad = ours.filter((r) => r.over > 0 || (r.pattern.startsWith('steady at the') && r.underPct > 2))
  if (bad.length > 0) {
    console.error(`\nFAIL: ${bad.map((r) => r.pattern).join(', ')}`)
    process.exitCode = 1
  }
}
