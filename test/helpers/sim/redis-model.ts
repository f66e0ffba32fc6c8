// The simulator's Redis: one single-threaded server on the world's clock, running the limiter's
// real Lua scripts (lua/grant.lua, lua/epoch.lua) in an embedded Lua VM (fengari) over an
// in-memory keyspace — every script atomic, commands run in arrival order — with the faults of a
// real one: SIGSTOP (commands queue, then run at once, at the Redis time of the thaw), a kill
// (connections drop, queued commands are lost, the data too unless it persists) and a restart.
// Redis time is the world's plus a skew. Connections (sim/connection.ts) carry commands both ways.
import { createRequire } from 'node:module'
import type { Script } from '../../../src/gateway/limiter/redis/port.js'
import type { World } from './world.js'

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
    LUA_TSTRING: number
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

/** Values are kept as the Lua VM's own byte strings: a script's HMGET and HSET then copy nothing. */
type Bytes = Uint8Array
interface Entry { hash?: Map<string, Bytes>, value?: Bytes, expireAt: number }

/**
 * The embedded Lua VM with the scripts compiled: made once and shared by the worlds a test runs
 * one after another (compiling is the slow part); each SimRedis installs its own keyspace into it.
 */
export interface LuaVm {
  readonly L: LuaState
  readonly fengari: Fengari
  readonly compiled: Map<string, number>
  /** The keyspace `redis.call` serves now. */
  current: SimRedis | undefined
}

export function createLuaVm (): LuaVm {
  const fengari = createRequire(import.meta.url)('fengari') as Fengari
  const L = fengari.lauxlib.luaL_newstate()
  fengari.lualib.luaL_openlibs(L)
  const vm: LuaVm = { L, fengari, compiled: new Map(), current: undefined }
  const { lua } = fengari
  lua.lua_createtable(L, 0, 1)
  lua.lua_pushjsfunction(L, () => {
    if (vm.current === undefined) throw new Error('no Redis is running a script')
    return vm.current.call()
  })
  lua.lua_setfield(L, -2, 'call')
  lua.lua_setglobal(L, 'redis')
  return vm
}

export type RedisState = 'running' | 'paused' | 'dead'

export class SimRedis {
  state: RedisState = 'running'
  /** Scripts run, and commands (calls and pings) served. */
  scripts = 0
  commands = 0
  private readonly data = new Map<string, Entry>()
  private readonly queued: Array<() => void> = []
  private readonly L: LuaState
  private readonly fengari: Fengari
  private readonly listeners: Array<(event: 'down' | 'up') => void> = []

  constructor (private readonly world: World, readonly skew: number, private readonly vm: LuaVm) {
    this.fengari = vm.fengari
    this.L = vm.L
  }

  /** Redis's clock, Unix ms. */
  time (): number {
    return this.world.now + this.skew
  }

  /** Connections hear when the server dies (`down`) and when it is back (`up`). */
  onLifecycle (listener: (event: 'down' | 'up') => void): void {
    this.listeners.push(listener)
  }

  /** A command reached the server: run now, or when a paused server thaws; dropped if it is dead. */
  arrive (run: () => void): void {
    if (this.state === 'dead') return
    if (this.state === 'paused') this.queued.push(run)
    else run()
  }

  pause (): void {
    if (this.state === 'running') this.state = 'paused'
  }

  resume (): void {
    if (this.state !== 'paused') return
    this.state = 'running'
    for (const run of this.queued.splice(0)) run()
  }

  kill (): void {
    this.state = 'dead'
    this.queued.length = 0
    for (const l of this.listeners) l('down')
  }

  restart (keepData: boolean): void {
    if (!keepData) this.data.clear()
    this.state = 'running'
    for (const l of this.listeners) l('up')
  }

  /** Runs a script (atomically, at Redis time now): its reply, as Redis would turn it into RESP. */
  runScript (script: Script, keys: readonly string[], args: readonly string[]): unknown {
    const { lua, lauxlib, to_luastring } = this.fengari
    const L = this.L
    this.vm.current = this
    let ref = this.vm.compiled.get(script.sha)
    if (ref === undefined) {
      if (lauxlib.luaL_loadstring(L, to_luastring('local KEYS, ARGV = ...\nlocal unpack = table.unpack\n' + script.lua)) !== 0) {
        throw new Error(`${script.name} does not compile: ${lua.lua_tojsstring(L, -1)}`)
      }
      ref = lauxlib.luaL_ref(L, lua.LUA_REGISTRYINDEX)
      this.vm.compiled.set(script.sha, ref)
    }
    this.scripts++
    lua.lua_rawgeti(L, lua.LUA_REGISTRYINDEX, ref)
    for (const list of [keys, args]) {
      lua.lua_createtable(L, list.length, 0)
      list.forEach((v, i) => { lua.lua_pushstring(L, v); lua.lua_rawseti(L, -2, i + 1) })
    }
    if (lua.lua_pcall(L, 2, 1, 0) !== 0) {
      const message = lua.lua_tojsstring(L, -1)
      lua.lua_pop(L, 1)
      throw new Error(`${script.name} failed: ${message}`)
    }
    const reply = this.readReply()
    lua.lua_pop(L, 1)
    return reply
  }

  /** A hash field or string as stored (tests and checks), undefined when absent. */
  peek (key: string, field?: string): string | undefined {
    const entry = this.live(key)
    const bytes = field === undefined ? entry?.value : entry?.hash?.get(field)
    return bytes === undefined ? undefined : Buffer.from(bytes).toString('latin1')
  }

  /** Sets a string key (a test's setup: an epoch mark from before). */
  set (key: string, value: string): void {
    this.data.set(key, { value: this.fengari.to_luastring(value), expireAt: Infinity })
  }

  keys (): string[] {
    return [...this.data.keys()].filter((k) => this.live(k) !== undefined)
  }

  private live (key: string): Entry | undefined {
    const entry = this.data.get(key)
    if (entry !== undefined && entry.expireAt <= this.time()) {
      this.data.delete(key)
      return undefined
    }
    return entry
  }

  private readReply (): unknown {
    const { lua } = this.fengari
    const L = this.L
    const type = lua.lua_type(L, -1)
    if (type === lua.LUA_TNUMBER) return Math.trunc(lua.lua_tonumber(L, -1))
    if (type === lua.LUA_TSTRING) return lua.lua_tojsstring(L, -1)
    const out: unknown[] = []
    for (let i = 1; i <= lua.lua_rawlen(L, -1); i++) {
      lua.lua_rawgeti(L, -1, i)
      out.push(this.readReply())
      lua.lua_pop(L, 1)
    }
    return out
  }

  /** One `redis.call` of a script, its arguments on the Lua stack: pushes the reply. */
  call (): number {
    const { lua, to_jsstring } = this.fengari as Fengari & { to_jsstring: (b: Bytes) => string }
    const L = this.L
    const n = lua.lua_gettop(L)
    const bytes = (i: number): Bytes => lua.lua_type(L, i) === lua.LUA_TNUMBER ? this.fengari.to_luastring(String(lua.lua_tonumber(L, i))) : (lua as unknown as { lua_tolstring: (L: LuaState, i: number) => Bytes }).lua_tolstring(L, i)
    const text = (i: number): string => lua.lua_type(L, i) === lua.LUA_TNUMBER ? String(lua.lua_tonumber(L, i)) : to_jsstring(bytes(i))
    const push = (v: Bytes | undefined): void => { if (v === undefined) lua.lua_pushboolean(L, false); else lua.lua_pushstring(L, v as unknown as string) }
    const command = text(1).toUpperCase()
    const key = n >= 2 ? text(2) : ''
    this.commands++
    switch (command) {
      case 'TIME': {
        const t = this.time()
        lua.lua_createtable(L, 2, 0)
        lua.lua_pushinteger(L, Math.floor(t / 1000)); lua.lua_rawseti(L, -2, 1)
        lua.lua_pushinteger(L, Math.floor((t % 1000) * 1000)); lua.lua_rawseti(L, -2, 2)
        return 1
      }
      case 'HMGET': {
        const hash = this.live(key)?.hash
        lua.lua_createtable(L, n - 2, 0)
        for (let i = 3; i <= n; i++) { push(hash?.get(text(i))); lua.lua_rawseti(L, -2, i - 2) }
        return 1
      }
      case 'HGET': push(this.live(key)?.hash?.get(text(3))); return 1
      case 'HSET': {
        let entry = this.live(key)
        if (entry === undefined) {
          entry = { hash: new Map(), expireAt: Infinity }
          this.data.set(key, entry)
        }
        entry.hash ??= new Map()
        for (let i = 3; i + 1 <= n; i += 2) entry.hash.set(text(i), bytes(i + 1))
        lua.lua_pushinteger(L, 0); return 1
      }
      case 'HDEL': { const hash = this.live(key)?.hash; for (let i = 3; i <= n; i++) hash?.delete(text(i)); lua.lua_pushinteger(L, 0); return 1 }
      case 'PEXPIREAT': { const e = this.live(key); if (e !== undefined) e.expireAt = Number(text(3)); lua.lua_pushinteger(L, e === undefined ? 0 : 1); return 1 }
      case 'GET': push(this.live(key)?.value); return 1
      case 'SET': this.data.set(key, { value: bytes(3), expireAt: Infinity }); lua.lua_pushstring(L, this.fengari.to_luastring('OK') as unknown as string); return 1
      case 'DEL': { const had = this.live(key) !== undefined; this.data.delete(key); lua.lua_pushinteger(L, had ? 1 : 0); return 1 }
      default: throw new Error(`redis.call ${command} is not modelled`)
    }
  }
}
