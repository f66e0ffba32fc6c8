// The limiter's Lua scripts on a virtual clock: an embedded Lua VM (fengari) whose `redis.call`
// answers TIME from an injected clock and the hash, key and TTL commands the scripts use from an
// in-memory map. The accuracy replay and the lease tests run the real scripts through it without
// waiting for real time; everything else about Redis is tested against a real redis-server.
import { createRequire } from 'node:module'
import { DAY_WINDOW } from '../../src/gateway/limiter/arithmetic.js'
import type { LimiterScript, ScriptArg } from '../../src/gateway/limiter/stores/redis-scripts.js'

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
export const LUA_EPOCH_MS = Date.UTC(2029, 11, 31)

export type LuaReply = number | number[] | number[][]

export interface LuaRedis {
  /** Runs `script` (as Redis would: atomically, on the VM's data): its reply, integers truncated as Redis does (a batch's: one list per decision). */
  run: (script: LimiterScript, keys: string[], args: ScriptArg[]) => LuaReply
  /** A hash field as stored, or undefined. */
  hget: (key: string, field: string) => string | undefined
}

/**
 * Lua 5.3 runs Redis's 5.1 scripts unchanged but for `unpack`, which is provided. Times are Unix ms
 * from `clock`, which must stay within 32-bit ms of LUA_EPOCH_MS.
 */
export function createLuaRedis (clock: () => number): LuaRedis {
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
  const compiled = new Map<string, number>()
  const load = (script: LimiterScript): number => {
    let ref = compiled.get(script.sha)
    if (ref === undefined) {
      if (lauxlib.luaL_loadstring(L, to_luastring('local KEYS, ARGV = ...\nlocal unpack = table.unpack\n' + script.lua)) !== 0) {
        throw new Error(`${script.command} does not compile: ${lua.lua_tojsstring(L, -1)}`)
      }
      ref = lauxlib.luaL_ref(L, lua.LUA_REGISTRYINDEX)
      compiled.set(script.sha, ref)
    }
    return ref
  }
  const pushList = (values: ScriptArg[]): void => {
    lua.lua_createtable(L, values.length, 0)
    values.forEach((v, i) => { lua.lua_pushstring(L, String(v)); lua.lua_rawseti(L, -2, i + 1) })
  }
  /** The value on top of the stack: an integer, a list of them, or a list of such lists. */
  const readReply = (): LuaReply => {
    if (lua.lua_type(L, -1) === lua.LUA_TNUMBER) return Math.trunc(lua.lua_tonumber(L, -1))
    const flat: number[] = []
    const nested: number[][] = []
    for (let i = 1; i <= lua.lua_rawlen(L, -1); i++) {
      lua.lua_rawgeti(L, -1, i)
      const item = readReply()
      if (typeof item === 'number') flat.push(item)
      else nested.push(item as number[])
      lua.lua_pop(L, 1)
    }
    return nested.length > 0 ? nested : flat
  }
  return {
    run (script, keys, args) {
      lua.lua_rawgeti(L, lua.LUA_REGISTRYINDEX, load(script))
      pushList(keys)
      pushList(args)
      if (lua.lua_pcall(L, 2, 1, 0) !== 0) throw new Error(`${script.command} failed: ${lua.lua_tojsstring(L, -1)}`)
      const reply = readReply()
      lua.lua_pop(L, 1)
      return reply
    },
    hget: (key, field) => live(key)?.hash.get(field)
  }
}
