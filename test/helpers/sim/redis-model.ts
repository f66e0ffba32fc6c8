// The simulator's Redis: one single-threaded server on the world's clock, running the limiter's
// real Lua scripts (lua/grant.lua, lua/epoch.lua) in an embedded Lua VM (wasmoon: the reference Lua
// compiled to WebAssembly) over a keyspace kept in that VM — every script atomic, commands run in
// arrival order — with the faults of a real one: SIGSTOP (commands queue, then run at once, at the
// Redis time of the thaw), a kill (connections drop, queued commands are lost, the data too unless
// it persists) and a restart. Redis time is the world's plus a skew. The script sees `redis.call`
// as Redis 7 gives it (numbers passed as arguments become their shortest decimal, replies truncate
// to integers); test/gateway/limiter/redis/sim-model.test.ts runs one sequence here and on a real
// redis-server and requires the same replies.
import { readFileSync } from 'node:fs'
import { LuaFactory } from 'wasmoon'
import type { Script } from '../../../src/gateway/limiter/redis/port.js'
import type { World } from './world.js'

/** The raw C API of the VM (wasmoon exposes it on its global thread). */
interface LuaApi {
  lua_getglobal: (L: number, name: string) => number
  lua_pushstring: (L: number, s: string) => string
  lua_pcallk: (L: number, nargs: number, nresults: number, errfunc: number, ctx: number, k: number | null) => number
  lua_tolstring: (L: number, idx: number, len: number | null) => string
  lua_settop: (L: number, idx: number) => void
}

/**
 * The embedded Lua VM with the keyspace model and the scripts compiled: made once and shared by
 * the worlds a test runs one after another (each SimRedis has its own keyspace in it).
 */
export interface LuaVm {
  readonly api: LuaApi
  readonly L: number
  readonly defined: Set<string>
  next: number
}

const MODEL = readFileSync(new URL('./redis-model.lua', import.meta.url), 'utf8')

export async function createLuaVm (): Promise<LuaVm> {
  const engine = await new LuaFactory().createEngine({ openStandardLibs: true })
  await engine.doString(MODEL)
  const global = engine.global as unknown as { lua: LuaApi, address: number }
  return { api: global.lua, L: global.address, defined: new Set(), next: 0 }
}

/** Calls the model's global `fn` with string arguments; its one string result. */
function callModel (vm: LuaVm, fn: string, ...args: string[]): string {
  const { api, L } = vm
  api.lua_getglobal(L, fn)
  for (const a of args) api.lua_pushstring(L, a)
  const status = api.lua_pcallk(L, args.length, 1, 0, 0, null)
  const out = api.lua_tolstring(L, -1, null)
  api.lua_settop(L, -2)
  if (status !== 0) throw new Error(out)
  return out
}

const SEP = '\x1f'

export type RedisState = 'running' | 'paused' | 'dead'

export class SimRedis {
  state: RedisState = 'running'
  /** Kills so far: a connection belongs to one incarnation, and what was sent on it never reaches the next. */
  incarnation = 0
  /** Scripts run. */
  scripts = 0
  /** Its keyspace in the VM. */
  readonly id: string
  private readonly queued: Array<() => void> = []
  private readonly listeners: Array<(event: 'down' | 'up') => void> = []

  private readonly world: World
  readonly skew: number
  private readonly vm: LuaVm

  constructor (world: World, skew: number, vm: LuaVm) {
    this.world = world
    this.skew = skew
    this.vm = vm
    this.id = String(vm.next++)
    callModel(vm, 'reset', this.id)
  }

  /** Steps of Redis's clock so far (ms, forward positive), and its drift from the world's (a rate, from `driftFrom`). */
  private stepped = 0
  private drift = 0
  private driftFrom = 0

  /** Redis's clock, Unix ms: the world's plus the skew, its steps and its drift. */
  time (): number {
    return this.world.now + this.skew + this.stepped + this.drift * (this.world.now - this.driftFrom)
  }

  /** Redis's clock runs `rate` faster than the world's from now on (a realistic bound: well under DRIFT). */
  setDrift (rate: number): void {
    this.stepped += this.drift * (this.world.now - this.driftFrom)
    this.drift = rate
    this.driftFrom = this.world.now
  }

  /** Redis's clock steps by `ms` (an NTP step: forward positive, back negative). */
  stepClock (ms: number): void {
    this.stepped += ms
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

  /** False when the server is already dead (a kill cannot kill it again; its pending restart stands). */
  kill (): boolean {
    if (this.state === 'dead') return false
    this.state = 'dead'
    this.incarnation++
    this.queued.length = 0
    for (const l of this.listeners) l('down')
    return true
  }

  restart (keepData: boolean): void {
    if (this.state !== 'dead') return
    if (!keepData) callModel(this.vm, 'reset', this.id)
    this.state = 'running'
    for (const l of this.listeners) l('up')
  }

  /** `into`'s keyspace becomes a copy of this one's (a replica's, or a scratch copy to read). */
  copyInto (into: SimRedis): void {
    callModel(this.vm, 'copy', this.id, into.id)
  }

  /** A slot migration: `keys` (with their expiries) move to `to`'s keyspace, atomically. */
  moveKeys (to: SimRedis, keys: readonly string[]): void {
    for (const key of keys) callModel(this.vm, 'move', this.id, to.id, key)
  }

  /** Runs a script (atomically, at Redis time now): its reply, as a Redis client reads it. */
  runScript (script: Script, keys: readonly string[], args: readonly string[]): unknown {
    if (!this.vm.defined.has(script.sha)) {
      callModel(this.vm, 'define', script.sha, script.lua)
      this.vm.defined.add(script.sha)
    }
    // A fault may strike as the script arrives (the server dies before running it: the caller sees its link drop).
    this.beforeScript?.(script)
    if (this.state === 'dead') throw new Error('Connection is closed.')
    this.scripts++
    const out = callModel(this.vm, 'run', this.id, String(this.time()), script.sha, keys.join(SEP) + SEP, args.join(SEP) + SEP)
    const reply = decode(out)
    this.onScript?.(script, keys, args, reply)
    return reply
  }

  /** Told of every script as it arrives, before it runs (a fault timed on a call: reseed-edge's second kill). */
  beforeScript: ((script: Script) => void) | undefined = undefined

  /** Told of every script run and its reply (a failover's checker reads what the lost writes counted). */
  onScript: ((script: Script, keys: readonly string[], args: readonly string[], reply: unknown) => void) | undefined = undefined

  /** A hash field, or a string key without `field`, as stored; undefined when absent. */
  peek (key: string, field = ''): string | undefined {
    const out = callModel(this.vm, 'peek', this.id, String(this.time()), key, field)
    return out === '' ? undefined : out.slice(1)
  }

  /** The whole keyspace as text, keys and fields sorted, with expiries (to compare two keyspaces). */
  dump (): string {
    return callModel(this.vm, 'dump', this.id, String(this.time()))
  }

  /** Sets a string key (a test's setup: an epoch mark from before). */
  set (key: string, value: string): void {
    callModel(this.vm, 'set', this.id, key, value)
  }
}

/** The model's reply encoding: items joined by SEP, each 'n<integer>' or 's<string>', lists as 'l<count>' then items. */
function decode (out: string): unknown {
  const items = out.split(SEP)
  let i = 0
  const next = (): unknown => {
    const item = items[i++]!
    const tag = item.charCodeAt(0)
    if (tag === N_TAG) return Number(item.slice(1))
    if (tag === S_TAG) return item.slice(1)
    const count = Number(item.slice(1))
    const list: unknown[] = []
    for (let k = 0; k < count; k++) list.push(next())
    return list
  }
  return next()
}

const N_TAG = 'n'.charCodeAt(0)
const S_TAG = 's'.charCodeAt(0)
