// What the Redis store's wait adds to a request (issue 41 item 3): a consumer with no block yet waits
// for its turn's batched grant call (redis/batcher.ts: queued during the turn, sent at its end, one
// call per id in flight). This drives the limiter alone — the store as the gateway builds it
// (createStore), no HTTP, no proxy — at a constant rate with the bench's Zipf draw (10,000 consumers,
// s = 1.1, from its start), and times each consume() from the moment it was due to the moment it was
// decided, next to the in-process store driven the same way (whose decision is synchronous: the floor
// of the event loop's own lateness under this machine's load). Per store: p50 / p99 / p99.9 of the
// decision wait, the share of requests that waited for a call (decided later than the turn they
// arrived in), and the same for the first request of each consumer in the run (cold) against the rest
// (a later request waits when its consumer's block is spent or a call of its id is still in flight).
//   node --import ./src/ts-resolve.ts bench/cold-wait.ts   [COLD_RATE=2000 COLD_SECONDS=8 COLD_ROUNDS=3]
import { mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { createStore } from '../src/gateway/limiter/create-store.js'
import { askOf, type LimiterStore } from '../src/gateway/limiter/store.js'
import { startRedis, stop } from './lib/processes.js'
import { DEFAULT_ZIPF_CONSUMERS, DEFAULT_ZIPF_EXPONENT, DEFAULT_ZIPF_SEED, DEFAULT_ZIPF_SEQUENCE_LENGTH, zipfSequence } from './lib/zipf.js'

const RATE = Number(process.env.COLD_RATE ?? 2000)
const SECONDS = Number(process.env.COLD_SECONDS ?? 8)
const ROUNDS = Number(process.env.COLD_ROUNDS ?? 3)
/** Limits no run reaches, as the bench's plans. */
const ASK = askOf({ perMinute: 10_000_000, perDay: 1_000_000_000 })
/** A request issued every TICK_MS, in bursts of RATE × TICK_MS / 1000: a constant rate within a ms. */
const TICK_MS = 1

interface Waits { all: number[], cold: number[], warm: number[], waitedForCall: number, warmWaited: number }

const ids = zipfSequence({ consumers: DEFAULT_ZIPF_CONSUMERS, exponent: DEFAULT_ZIPF_EXPONENT, length: DEFAULT_ZIPF_SEQUENCE_LENGTH, seed: DEFAULT_ZIPF_SEED }).map((rank) => `zipf-consumer-${rank}`)

async function drive (store: LimiterStore, runTag: string): Promise<Waits> {
  const waits: Waits = { all: [], cold: [], warm: [], waitedForCall: 0, warmWaited: 0 }
  const seen = new Set<string>()
  const total = RATE * SECONDS
  const start = performance.now()
  let issued = 0
  let pending = 0
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const due = Math.min(total, Math.floor((performance.now() - start) * RATE / 1000))
      for (; issued < due; issued++) {
        const id = `${runTag}:${ids[issued % ids.length]!}`
        const cold = !seen.has(id)
        seen.add(id)
        const dueAt = start + issued * 1000 / RATE
        let sameTurn = true
        setImmediate(() => { sameTurn = false })
        pending++
        void store.consume(id, ASK).then(() => {
          const wait = performance.now() - dueAt
          waits.all.push(wait)
          ;(cold ? waits.cold : waits.warm).push(wait)
          if (!sameTurn) waits.waitedForCall++
          if (!sameTurn && !cold) waits.warmWaited++
          if (--pending === 0 && issued >= total) resolve()
        })
      }
      if (issued >= total) {
        clearInterval(timer)
        if (pending === 0) resolve()
      }
    }, TICK_MS)
  })
  return waits
}

const quantile = (values: number[], q: number): number => {
  if (values.length === 0) return NaN
  const sorted = Float64Array.from(values).sort()
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}
const median = (values: number[]): number => quantile(values, 0.5)
const fmt = (ms: number): string => ms.toFixed(2)

const dir = mkdtempSync(join(tmpdir(), 'cold-wait-'))
const redis = await startRedis(dir)
const rows: Record<string, Array<{ p50: number, p99: number, p999: number, waited: number, coldP99: number, warmP99: number, cold: number, warmWaited: number }>> = {}
try {
  const stores: Record<string, () => Promise<LimiterStore>> = {
    'in-process store': async () => await createStore({}),
    'Redis store': async () => await createStore({ redisUrl: redis.url })
  }
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? Object.keys(stores) : Object.keys(stores).reverse()
    for (const name of order) {
      const store = await stores[name]!()
      const waits = await drive(store, `r${round}`)
      await store.close()
      ;(rows[name] ??= []).push({
        p50: quantile(waits.all, 0.5),
        p99: quantile(waits.all, 0.99),
        p999: quantile(waits.all, 0.999),
        waited: waits.waitedForCall / waits.all.length,
        coldP99: quantile(waits.cold, 0.99),
        warmP99: quantile(waits.warm, 0.99),
        cold: waits.cold.length / waits.all.length,
        warmWaited: waits.warmWaited / Math.max(1, waits.warm.length)
      })
      console.error(`round ${round + 1}/${ROUNDS} ${name}: p99 ${fmt(quantile(waits.all, 0.99))} ms, waited for a call ${(100 * waits.waitedForCall / waits.all.length).toFixed(1)} %`)
    }
  }
} finally {
  await stop(redis.child)
  rmSync(dir, { recursive: true, force: true })
}

console.log(`load average ${loadavg().map((value) => value.toFixed(1)).join(' ')}; ${ROUNDS} interleaved rounds × ${SECONDS} s at ${RATE} decisions/s, Zipf (10,000 consumers, s = 1.1); medians of the rounds; wait = decided − due, ms`)
console.log('| store | p50 | p99 | p99.9 | waited for a call | first request of a consumer: share / p99 | later requests: waited for a call / p99 |')
console.log('|---|---:|---:|---:|---:|---:|---:|')
for (const [name, runs] of Object.entries(rows)) {
  const pick = (field: keyof (typeof runs)[number]): number => median(runs.map((run) => run[field]))
  console.log(`| ${name} | ${fmt(pick('p50'))} | ${fmt(pick('p99'))} | ${fmt(pick('p999'))} | ${(100 * pick('waited')).toFixed(1)} % | ${(100 * pick('cold')).toFixed(1)} % / ${fmt(pick('coldP99'))} | ${(100 * pick('warmWaited')).toFixed(1)} % / ${fmt(pick('warmP99'))} |`)
}
