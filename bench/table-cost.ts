// What a request's table touch costs, alone: the key cache's and the in-process store's lookups as
// they were (lru-cache: an exact LRU, the store's with a TTL renewed on every get) against the
// second-chance map that replaced them (src/shared/second-chance-map.ts), on the bench's three
// traffic shapes (one hot key, 1,000 keys in turn, the Zipf draw over 10,000 consumers). One process,
// no I/O: CPU ns per lookup (user + system of the process, steadier than wall time on a shared core) and bytes allocated per lookup, interleaved rounds, medians. Pin it
// (`taskset -c 0`) and read it beside the load average it prints.
//   node --import ./src/ts-resolve.ts --expose-gc bench/table-cost.ts  [TABLE_ROUNDS=9 TABLE_LOOKUPS=1000000]
import { LRUCache } from 'lru-cache'
import { loadavg } from 'node:os'
import { SecondChanceMap } from '../src/shared/second-chance-map.js'
import { DEFAULT_ZIPF_CONSUMERS, DEFAULT_ZIPF_EXPONENT, DEFAULT_ZIPF_SEED, DEFAULT_ZIPF_SEQUENCE_LENGTH, zipfSequence } from './lib/zipf.js'

const ROUNDS = Number(process.env.TABLE_ROUNDS ?? 9)
const LOOKUPS = Number(process.env.TABLE_LOOKUPS ?? 1_000_000)
const IDLE_MS = 2 * 86_400_000

interface Value { seenAt: number, count: number }
type Lookup = (key: string, nowMs: number) => Value

/** The store's table before: lru-cache with a TTL renewed on get, the clock passed in as the store did. */
function lruWithTtl (max: number, now: () => number): Lookup {
  const table = new LRUCache<string, Value>({ max, ttl: IDLE_MS, updateAgeOnGet: true, perf: { now } })
  return (key, nowMs) => {
    let value = table.get(key)
    if (value === undefined) { value = { seenAt: nowMs, count: 0 }; table.set(key, value) }
    return value
  }
}

/** The key cache before: lru-cache, no TTL. */
function lruPlain (max: number): Lookup {
  const table = new LRUCache<string, Value>({ max })
  return (key, nowMs) => {
    let value = table.get(key)
    if (value === undefined) { value = { seenAt: nowMs, count: 0 }; table.set(key, value) }
    return value
  }
}

/** After: the second-chance map; the idle time checked and renewed on the value, as the store now does. */
function secondChance (max: number): Lookup {
  const table = new SecondChanceMap<string, Value>(max)
  return (key, nowMs) => {
    let value = table.get(key)
    if (value !== undefined && nowMs - value.seenAt > IDLE_MS) { table.delete(key); value = undefined }
    if (value === undefined) { value = { seenAt: nowMs, count: 0 }; table.set(key, value) }
    value.seenAt = nowMs
    return value
  }
}

/** The floor: an unbounded Map, what any table pays at least (and the loop, the clock, the key pick). */
function plainMap (): Lookup {
  const table = new Map<string, Value>()
  return (key, nowMs) => {
    let value = table.get(key)
    if (value === undefined) { value = { seenAt: nowMs, count: 0 }; table.set(key, value) }
    return value
  }
}

const keys = Array.from({ length: DEFAULT_ZIPF_CONSUMERS }, (_, index) => `psk_consumer_${String(index).padStart(6, '0')}`)
const zipf = zipfSequence({ consumers: DEFAULT_ZIPF_CONSUMERS, exponent: DEFAULT_ZIPF_EXPONENT, length: DEFAULT_ZIPF_SEQUENCE_LENGTH, seed: DEFAULT_ZIPF_SEED }).map((rank) => keys[rank]!)
const shapes: Record<string, (index: number) => string> = {
  hot: () => keys[0]!,
  keys: (index) => keys[index % 1000]!,
  zipf: (index) => zipf[index % zipf.length]!
}
const makers: Record<string, (now: () => number) => Lookup> = {
  'lru-cache (key cache)': () => lruPlain(10_000),
  'lru-cache ttl (store)': (now) => lruWithTtl(100_000, now),
  'second-chance map': () => secondChance(100_000),
  'Map, unbounded (floor)': () => plainMap()
}

function measure (make: (now: () => number) => Lookup, shape: (index: number) => string): { ns: number, bytes: number } {
  const lookup = make(Date.now)
  for (let i = 0; i < 50_000; i++) lookup(shape(i), Date.now()) // fill and warm up
  globalThis.gc?.()
  const heapBefore = process.memoryUsage().heapUsed
  const start = process.cpuUsage()
  let sink = 0
  for (let i = 0; i < LOOKUPS; i++) sink += lookup(shape(i), Date.now()).count
  const spent = process.cpuUsage(start)
  const ns = (spent.user + spent.system) * 1000 / LOOKUPS
  const bytes = (process.memoryUsage().heapUsed - heapBefore) / LOOKUPS
  if (sink < 0) console.log(sink)
  return { ns, bytes }
}

const median = (values: number[]): number => { const sorted = [...values].sort((a, b) => a - b); return sorted[Math.floor(sorted.length / 2)]! }
const results: Record<string, { ns: number[], bytes: number[] }> = {}
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? Object.keys(makers) : Object.keys(makers).reverse()
  for (const shapeName of Object.keys(shapes)) {
    for (const makerName of order) {
      const { ns, bytes } = measure(makers[makerName]!, shapes[shapeName]!)
      const row = (results[`${shapeName} | ${makerName}`] ??= { ns: [], bytes: [] })
      row.ns.push(ns)
      row.bytes.push(bytes)
    }
  }
}
console.log(`load average ${loadavg().map((value) => value.toFixed(1)).join(' ')}; ${ROUNDS} rounds × ${LOOKUPS} lookups (incl. Date.now and the shape's key pick)`)
console.log('| shape | table | CPU ns per lookup (median) | min–max | bytes allocated per lookup (median) |')
console.log('|---|---|---:|---:|---:|')
for (const [name, row] of Object.entries(results)) {
  const [shapeName, makerName] = name.split(' | ')
  console.log(`| ${shapeName} | ${makerName} | ${median(row.ns).toFixed(1)} | ${Math.min(...row.ns).toFixed(1)}–${Math.max(...row.ns).toFixed(1)} | ${median(row.bytes).toFixed(1)} |`)
}
