// The accuracy replay: traffic patterns on a virtual clock (deterministic, no sleeping) through the
// stores themselves — the in-process store's consume, and the Redis path's grant script run by the
// simulator's Redis (sim/redis-model.ts) whose TIME is the virtual clock, the requests of one
// instant in one call as a process sends them — a fixed window (Kong OSS, Envoy ratelimit,
// @fastify/rate-limit) and the two-counter estimate (Cloudflare), against an exact per-request log
// as the ideal. Over-admission: most admissions in any rolling window beyond the
// limit (ours must be 0). Under-admission: admissions the ideal makes and the model refuses, in %.
// test/gateway/limiter/accuracy.test.ts and bench/accuracy.ts (the full replay's table) run it.
import { DAY_WINDOW, MINUTE_WINDOW, type WindowSpec } from '../../src/gateway/limiter/arithmetic.js'
import { createMemoryStore } from '../../src/gateway/limiter/memory/store.js'
import { BATCH_MAX } from '../../src/gateway/limiter/redis/batcher.js'
import { GRANT, grantArgs, grantKeys, readGrantReply } from '../../src/gateway/limiter/redis/scripts.js'
import { createLuaVm, SimRedis, type LuaVm } from './sim/redis-model.js'
import { World } from './sim/world.js'

export const MINUTE_LIMIT = 60
export const DAY_LIMIT = 1000
const HOUR = 3_600_000
const START = Date.UTC(2030, 0, 1) + 12_345

type Admit = (t: number) => boolean | Promise<boolean>
/** Requests arriving at one instant, decided together (the Redis store's batch of one turn). */
type AdmitBatch = (t: number, n: number) => boolean[]

interface Model { name: string, make: (spec: WindowSpec, limit: number) => Admit, makeBatch?: (spec: WindowSpec, limit: number, vm: LuaVm) => AdmitBatch }

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
        return (await store.consume('replay', { limits, ban: null, cost: 1, monthLimit: 0, overage: false })).outcome === 'ok'
      }
    }
  },
  {
    // As a process asks: the requests of one instant (one turn) in one grant call's entry.
    name: 'ours: Redis script',
    make: () => { throw new Error('batched only') },
    makeBatch: (spec, limit, vm) => scriptAdmit(spec, limit, vm)
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

/** The grant script on the simulator's Redis: `n` requests of one consumer at virtual time `t`. */
function scriptAdmit (spec: WindowSpec, limit: number, vm: LuaVm): AdmitBatch {
  const world = new World(1, 0)
  const redis = new SimRedis(world, 0, vm)
  const { perMinute, perDay } = limitsFor(spec, limit)
  const entry = { key: 'rl:{replay}', minuteLimit: perMinute, dayLimit: perDay, monthLimit: 0, monthSoft: false, cost: 1, extra: 0, reserve: 0, write: true, ban: null, adjustments: [], blocksBucket: -1, blocks: 0 }
  return (t, n) => {
    world.now = t
    const e = { ...entry, requests: n }
    const admitted = readGrantReply(redis.runScript(GRANT, grantKeys([e]), grantArgs('replay', [e])), 1).replies[0]!.admitted
    return Array.from({ length: n }, (_, i) => i < admitted)
  }
}

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
  const vm = await createLuaVm()
  const rows: Row[] = []
  for (const pattern of patternsAt(scale)) {
    const results: Array<{ model: string, admitted: number[] }> = []
    for (const model of models) {
      const admitted: number[] = []
      if (model.makeBatch === undefined) {
        const admit = model.make(pattern.spec, pattern.limit)
        for (const t of pattern.times) if (await admit(t)) admitted.push(t)
      } else {
        const admit = model.makeBatch(pattern.spec, pattern.limit, vm)
        for (let i = 0; i < pattern.times.length;) {
          const t = pattern.times[i]!
          let n = 1
          while (n < BATCH_MAX && pattern.times[i + n] === t) n++
          for (const ok of admit(t, n)) if (ok) admitted.push(t)
          i += n
        }
      }
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

