// Schedules of the `outage-tail` family: the long tail through one Redis outage under the shipped
// STORE_ON_ERROR=local. Hundreds of consumers drawn by Zipf (s = 1.1) far below their limits, a few
// racing theirs, on two or three processes; one outage — a pause or a kill with or without its
// data — from 1 s to past the reserve's cover (62 s), with traffic before, through and after it
// (recovery included), and now and then a small fault on top. What it must show (the test file):
// every rolling window within the limit plus the outage allowance, and the tail answered. One more
// consumer surges right after the outage: the case the allowance's bound is for.
import type { Net } from './process.js'
import type { Arrival, Consumer, Fault, Schedule } from './schedules.js'
import type { World } from './world.js'

/** What makeSchedule has settled for every family. */
type Base = Pick<Schedule, 'family' | 'policy' | 'timeoutMs' | 'barrierMs' | 'net' | 'skew' | 'seasoned' | 'steady'>

/** The Zipf exponent of the consumers' shares of the traffic. */
export const ZIPF_S = 1.1
/** Arrivals of one schedule at most: the family's cost is the simulator's time per request. */
const MAX_ARRIVALS = 4_000

const int = (w: World, a: number, b: number): number => Math.floor(w.between(a, b + 1))

/** The consumer of rank k (0-based) of `n`, by Zipf: a draw of the cumulative shares. */
export function zipfPicker (n: number): (u: number) => number {
  const cumulative: number[] = []
  let sum = 0
  for (let k = 1; k <= n; k++) cumulative.push(sum += 1 / k ** ZIPF_S)
  return (u) => {
    const target = u * sum
    let lo = 0
    let hi = n - 1
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (cumulative[mid]! < target) lo = mid + 1
      else hi = mid
    }
    return lo
  }
}

/** The outage: how long, and which fault makes it. Lengths from 1 s to past the reserve's cover. */
function outageOf (w: World, at: number): Fault {
  const ms = w.chance(0.3) ? w.between(1_000, 5_000) : w.chance(0.5) ? w.between(5_000, 20_000) : w.between(20_000, 90_000)
  const kind = w.chance(0.5) ? 'pause' : 'kill'
  return kind === 'pause' ? { kind, at, ms } : { kind, at, ms, keepData: w.chance(0.5) }
}

export function makeOutageTailSchedule (w: World, start: number, base: Base): Schedule {
  const processes = int(w, 2, 3)
  const count = int(w, 100, 300)
  const rate = w.between(10, 30) / 1000 // requests per virtual ms, all consumers together
  // The tail: limits far above what Zipf sends them; the first few racing theirs (the bound's test).
  const racing = int(w, 1, 3)
  const consumers: Consumer[] = Array.from({ length: count }, (_, k) => k < racing
    ? { id: `race${k}`, perMinute: int(w, 20, 120), perDay: 100_000, perMonth: 0, overage: false, ban: null }
    : { id: `tail${k}`, perMinute: 3_000, perDay: 3_000 * int(w, 20, 100), perMonth: 0, overage: false, ban: null })
  const warm = w.between(8_000, 15_000)
  const outage = outageOf(w, start + warm)
  const after = w.between(8_000, 15_000)
  const duration = warm + ('ms' in outage ? outage.ms : 0) + after
  const pick = zipfPicker(count - racing)
  const arrivals: Arrival[] = []
  for (let t = start + w.between(0, 50); t < start + duration && arrivals.length < MAX_ARRIVALS; t += -Math.log(1 - w.random()) / rate) {
    arrivals.push({ t, process: int(w, 0, processes - 1), consumer: racing + pick(w.random()), cost: 1 })
  }
  // The racing consumers: bursts above their limit, spread over the whole schedule.
  for (let k = 0; k < racing; k++) {
    const every = w.between(300, 2_000)
    for (let t = start + w.between(0, 1_000); t < start + duration; t += every) {
      const burst = int(w, 1, Math.max(1, Math.ceil(consumers[k]!.perMinute * every / 30_000)))
      for (let i = 0; i < burst; i++) arrivals.push({ t: t + w.between(0, 5), process: int(w, 0, processes - 1), consumer: k, cost: 1 })
    }
  }
  // A surging consumer: light before, steady through the outage (the allowance serves it), then a flood
  // right after it: the one kind that can end over its limit, by at most the allowance (the checker's bound).
  const surge = consumers.length
  const surgeLimit = int(w, 60, 400)
  consumers.push({ id: 'surge', perMinute: surgeLimit, perDay: surgeLimit * 50, perMonth: 0, overage: false, ban: null })
  const end = outage.at + ('ms' in outage ? outage.ms : 0)
  for (let t = start + w.between(0, 2_000); t < end; t += w.between(200, 3_000)) arrivals.push({ t, process: int(w, 0, processes - 1), consumer: surge, cost: 1 })
  for (let i = 0; i < 2 * surgeLimit; i++) arrivals.push({ t: end + w.between(0, 4_000), process: int(w, 0, processes - 1), consumer: surge, cost: 1 })
  arrivals.sort((a, b) => a.t - b.t)
  const faults: Fault[] = [outage]
  // Now and then a small fault on top: a stalled process or a reset link, during the outage or the recovery.
  if (w.chance(0.3)) {
    const at = outage.at + w.between(0, ('ms' in outage ? outage.ms : 0) + 3_000)
    faults.push(w.chance(0.5) ? { kind: 'stall', at, process: int(w, 0, processes - 1), ms: w.between(10, 300) } : { kind: 'reset', at, process: int(w, 0, processes - 1) })
  }
  const clean: Net = { base: w.between(0.05, 1), jitter: w.between(0, 1), slowChance: w.chance(0.3) ? w.between(0, 0.01) : 0, slowMs: w.between(5, 100) }
  return {
    ...base,
    policy: 'local',
    timeoutMs: 250,
    barrierMs: 2_000,
    net: clean,
    processes,
    consumers,
    arrivals,
    faults,
    duration,
    allowance: { share: 0.1, processes },
    outage: { from: outage.at, to: outage.at + ('ms' in outage ? outage.ms : 0) }
  }
}
