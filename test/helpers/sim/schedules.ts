// Seeded schedules for the simulator: who the consumers are, what load arrives at which process and
// when, and which faults strike. Each family aims at one kind of trouble; `chaos` draws from all of
// them at once. Everything is drawn from the world's random stream, so a seed is a schedule.
import type { BanPolicy } from '../../../src/gateway/config/types.js'
import type { OutageAllowance, StoreOnError } from '../../../src/gateway/limiter/redis/outage.js'
import { makeOutageTailSchedule } from './outage-schedules.js'
import type { Net } from './process.js'
import type { World } from './world.js'

/** The families of timing-schedules.ts: long windows that slide, recovery under traffic, calendar edges, clocks, long outages. */
export type TimingFamily = 'sliding' | 'recovery' | 'calendar' | 'clock' | 'long-outage' | 'drift-edge' | 'reserve-edge' | 'reseed-edge'
export const TIMING_FAMILIES: readonly TimingFamily[] = ['sliding', 'recovery', 'calendar', 'clock', 'long-outage', 'drift-edge', 'reserve-edge', 'reseed-edge']
export type Family = 'chaos' | 'idle-process' | 'ban-recover' | 'ban-slow-thaw' | 'data-loss' | 'steady' | 'long-tail' | 'burst' | 'outage-tail' | 'cluster' | 'cluster-clock' | 'cluster-reseed' | TimingFamily
export const FAMILIES: readonly Family[] = ['chaos', 'idle-process', 'ban-recover', 'ban-slow-thaw', 'data-loss', 'steady', 'long-tail', 'burst', 'outage-tail', 'cluster', 'cluster-clock', 'cluster-reseed', ...TIMING_FAMILIES]

export interface Consumer {
  readonly id: string
  readonly perMinute: number
  readonly perDay: number
  readonly perMonth: number
  /** `overage: allow`: the month is counted, never refuses (and is not a bound to check). */
  readonly overage: boolean
  readonly ban: BanPolicy | null
}

export type Fault =
  /** `node`: which node of a Cluster (default the first, the one Redis). */
  | { readonly kind: 'pause', readonly at: number, readonly ms: number, readonly node?: number }
  /**
   * `reseedCut`: once the server is back, it dies again (data kept) for `ms` as the `nth` grant call arrives —
   * after a loss, a re-seed (no process grants before it recovered) — so that process's re-seed fails.
   */
  | { readonly kind: 'kill', readonly at: number, readonly ms: number, readonly keepData: boolean, readonly node?: number, readonly reseedCut?: { readonly nth: number, readonly ms: number } }
  /** A Cluster node fails over to its replica, down `downMs`: the writes of its last `lagMs` are lost, its epoch mark kept. */
  | { readonly kind: 'failover', readonly at: number, readonly node: number, readonly lagMs: number, readonly downMs: number }
  /** A consumer's slot migrates to node `to` (its keys move with their data). */
  | { readonly kind: 'migrate', readonly at: number, readonly consumer: number, readonly to: number }
  | { readonly kind: 'reset', readonly at: number, readonly process: number }
  | { readonly kind: 'stall', readonly at: number, readonly process: number, readonly ms: number }
  | { readonly kind: 'crash', readonly at: number, readonly process: number, readonly restartAfter?: number }
  /** One process's link is cut for `ms` (it reconnects only then). */
  | { readonly kind: 'partition', readonly at: number, readonly process: number, readonly ms: number }
  /** One process's link is up but `delay` ms slower, for `ms`: its calls outlive their budget and are answered late. */
  /**
   * `onReserveDrop`: not at `at` but, from then on, as Redis runs the first call of that process that lowers a reserve
   * to half or less (that call's reply is late too). `onBacklog`: likewise, as Redis runs the first grant call of any
   * process that carries at least this many requests (a backlog let go at once: the requests parked through an
   * outage), that process's link (`process` unused).
   */
  | { readonly kind: 'slow', readonly at: number, readonly process: number, readonly ms: number, readonly delay: number, readonly onReserveDrop?: boolean, readonly onBacklog?: number }
  /** Redis's clock steps by `ms` (forward positive). */
  | { readonly kind: 'clock', readonly at: number, readonly ms: number }

export interface Arrival { readonly t: number, readonly process: number, readonly consumer: number, readonly cost: number }

export interface Schedule {
  readonly family: Family
  readonly processes: number
  readonly policy: StoreOnError
  readonly timeoutMs: number
  readonly barrierMs: number
  readonly net: Net
  readonly skew: number
  /** The Redis already holds an epoch mark from before (a deployment, not a fresh Redis). */
  readonly seasoned: boolean
  readonly consumers: readonly Consumer[]
  readonly arrivals: readonly Arrival[]
  readonly faults: readonly Fault[]
  readonly duration: number
  /** The family measures under-admission at steady load. */
  readonly steady: boolean
  /** data-loss: when each consumer's window is empty by truth again, so a request then must be admitted (virtual ms). */
  readonly freeAgainAt?: number
  /** Under `local`, the outage allowance (default: the shipped share over `processes`). */
  readonly allowance?: OutageAllowance
  /** outage-tail: the one long outage [from, to) (virtual ms), for the answered share. */
  readonly outage?: { readonly from: number, readonly to: number }
  /** The schedule's own first instant, when it needs one (a month's end): replaces the one drawn. */
  readonly start?: number
  /** Redis's clock runs this much faster than the world's (a rate; 0 when absent). */
  readonly redisDrift?: number
  /** The processes' clocks run this much faster than the world's, each drawn in [min, max] (default ±200 ppm). */
  readonly processDrift?: { readonly min: number, readonly max: number }
  /**
   * How the bound is checked: by the world's clock (the default: Redis's differs by a constant skew), or
   * by Redis's clock at each admission (it drifts or steps forward), with every rolling window
   * `slackMs` shorter — the stated bound of a forward step (docs/limiter-internals.md).
   */
  readonly checkBy?: { readonly clock: 'redis' | 'world', readonly slackMs: number }
  /** A Redis Cluster: one node per entry, each node's clock this many ms off the schedule's skew. */
  readonly cluster?: { readonly nodeSkews: readonly number[] }
}

/** Requests one schedule carries at most (beyond it, drawn at random): many short schedules find more than a few long ones. */
const MAX_ARRIVALS = 250

export const DEFAULT_BAN: BanPolicy = { threshold: 30, windowSeconds: 60, durationSeconds: 900, maxDurationSeconds: 86_400 }
export const int = (w: World, a: number, b: number): number => Math.floor(w.between(a, b + 1))
export const pick = <T>(w: World, items: readonly T[]): T => items[Math.floor(w.random() * items.length)]!

export function net (w: World): Net {
  return { base: w.between(0.05, 1.5), jitter: w.between(0, 2), slowChance: w.chance(0.5) ? w.between(0, 0.03) : 0, slowMs: w.between(5, 400) }
}

function consumer (w: World, id: string, month: boolean): Consumer {
  const perMinute = int(w, 3, 60)
  const perDay = perMinute * int(w, 1, 3)
  const ban = w.chance(0.4) ? null : w.chance(0.5) ? DEFAULT_BAN : { ...DEFAULT_BAN, threshold: int(w, 2, 10) }
  return { id, perMinute, perDay, perMonth: month ? perDay + int(w, 0, perDay) : 0, overage: month && w.chance(0.2), ban }
}

/** Second boundaries by Redis time, as virtual instants. */
export function boundary (start: number, skew: number, second: number): number {
  return Math.ceil((start + skew) / 1000) * 1000 + second * 1000 - skew
}

/** Load on one consumer: a steady stream plus bursts on second boundaries, spread or stuck to one process. */
function load (w: World, s: { start: number, skew: number, duration: number, processes: number }, c: number, perMinute: number, costly: boolean): Arrival[] {
  const out: Arrival[] = []
  const sticky = w.chance(0.3) ? int(w, 0, s.processes - 1) : -1
  const proc = (): number => sticky >= 0 ? sticky : int(w, 0, s.processes - 1)
  const cost = (): number => costly && w.chance(0.3) ? int(w, 2, 5) : 1
  const rate = w.between(0.2, 3) * perMinute / 60_000
  for (let t = s.start + w.between(0, 2000); t < s.start + s.duration && out.length < 120; t += -Math.log(1 - w.random()) / rate) {
    out.push({ t, process: proc(), consumer: c, cost: cost() })
  }
  const every = int(w, 1, 10)
  const size = int(w, 1, Math.max(2, Math.floor(perMinute / 2)))
  for (let k = 1; boundary(s.start, s.skew, k) < s.start + s.duration && out.length < 200; k += every) {
    if (!w.chance(0.5)) continue
    for (let i = 0; i < size; i++) out.push({ t: boundary(s.start, s.skew, k) + w.between(0, 3), process: proc(), consumer: c, cost: cost() })
  }
  return out
}

export function faults (w: World, start: number, duration: number, processes: number, n: number): Fault[] {
  const out: Fault[] = []
  for (let i = 0; i < n; i++) {
    const at = start + w.between(0, duration)
    const kind = pick(w, ['pause', 'pause', 'kill', 'reset', 'stall', 'stall', 'crash'] as const)
    if (kind === 'pause') out.push({ kind, at, ms: w.chance(0.5) ? w.between(20, 400) : w.between(400, 3000) })
    else if (kind === 'kill') out.push({ kind, at, ms: w.between(20, 2000), keepData: w.chance(0.4) })
    else if (kind === 'reset') out.push({ kind, at, process: int(w, 0, processes - 1) })
    else if (kind === 'stall') out.push({ kind, at, process: int(w, 0, processes - 1), ms: w.between(10, 400) })
    else if (w.chance(0.3)) out.push({ kind, at, process: int(w, 0, processes - 1) })
  }
  return out
}

export function makeSchedule (w: World, family: Family, start: number): Schedule {
  const skew = w.between(-5000, 5000)
  const base = { family, policy: 'local' as StoreOnError, timeoutMs: 250, barrierMs: 2000, net: net(w), skew, seasoned: w.chance(0.7), steady: false }
  if (family === 'outage-tail') return makeOutageTailSchedule(w, start, { ...base, family })
  if (family === 'steady') {
    const processes = int(w, 1, 3)
    const perMinute = int(w, 60, 120)
    const duration = 300_000
    const arrivals: Arrival[] = []
    const gap = 60_000 / perMinute
    for (let t = start + 500, i = 0; t < start + duration; t += gap, i++) arrivals.push({ t, process: i % processes, consumer: 0, cost: 1 })
    const clean: Net = { base: w.between(0.05, 1), jitter: w.between(0, 1), slowChance: 0, slowMs: 0 }
    return { ...base, net: clean, processes, seasoned: true, steady: true, consumers: [{ id: 'steady', perMinute, perDay: perMinute * 1000, perMonth: 0, overage: false, ban: null }], arrivals, faults: [], duration }
  }
  if (family === 'idle-process') {
    // B sees the consumer a few times, then idles while A spends most of the minute; Redis freezes; B floods.
    const perMinute = int(w, 20, 120)
    const c: Consumer = { id: 'idle', perMinute, perDay: perMinute * 10, perMonth: 0, overage: false, ban: DEFAULT_BAN }
    const arrivals: Arrival[] = []
    for (let i = 0; i < 3; i++) arrivals.push({ t: start + 100 + i * 50, process: 1, consumer: 0, cost: 1 })
    const used = Math.floor(perMinute * w.between(0.6, 0.95))
    for (let i = 0; i < used; i++) arrivals.push({ t: start + 1000 + i * w.between(5, 40), process: 0, consumer: 0, cost: 1 })
    const freeze = start + w.between(3000, 6000)
    const ms = w.between(500, 3000)
    for (let i = 0; i < perMinute; i++) arrivals.push({ t: freeze + w.between(0, ms + 3000), process: 1, consumer: 0, cost: 1 })
    return { ...base, processes: 2, consumers: [c], arrivals, faults: [{ kind: 'pause', at: freeze, ms }], duration: 40_000 }
  }
  if (family === 'ban-recover' || family === 'ban-slow-thaw') {
    const perMinute = int(w, 60, 120)
    const c: Consumer = { id: 'flood', perMinute, perDay: perMinute * 10, perMonth: 0, overage: false, ban: DEFAULT_BAN }
    const arrivals: Arrival[] = []
    const before = Math.floor(perMinute * w.between(0.3, 0.5))
    for (let i = 0; i < before; i++) arrivals.push({ t: start + i * 20, process: i % 2, consumer: 0, cost: 1 })
    const freeze = start + before * 20 + w.between(0, 500)
    // The flood runs through the 3 s freeze and 2 s past it.
    for (let i = 0; i < 4 * perMinute; i++) arrivals.push({ t: freeze - 300 + i * 5300 / (4 * perMinute), process: i % 2, consumer: 0, cost: 1 })
    const faults: Fault[] = [{ kind: 'pause', at: freeze, ms: 3000 }]
    // ban-slow-thaw: as Redis runs the first call that carries a process's parked backlog after the thaw, that
    // process's link turns slower than the call budget for a moment: the call is given up, its reply (what Redis
    // admitted of the backlog) comes late, while the other process's backlog is refused into a ban.
    if (family === 'ban-slow-thaw') faults.push({ kind: 'slow', at: freeze + 3000, process: 0, ms: w.between(50, 300), delay: w.between(300, 600), onBacklog: 5 })
    return { ...base, processes: 2, consumers: [c], arrivals, faults, duration: 40_000 }
  }
  if (family === 'burst') {
    // A fresh consumer's burst of a third more than its minute limit, spread over up to 2.5 s from a
    // moment anywhere in a second, across two processes: the limit is reached, nothing is stranded in
    // a process's pool while the other process's requests are refused.
    const perMinute = int(w, 60, 400)
    const c: Consumer = { id: 'burst', perMinute, perDay: perMinute * 10, perMonth: 0, overage: false, ban: null }
    const spread = w.between(50, 2500)
    const from = start + w.between(0, 1000)
    // Split evenly, or moving from process 0 to process 1 as the burst goes on (blocks one holds are given back when their second ends).
    const moving = w.chance(0.5)
    const arrivals: Arrival[] = Array.from({ length: Math.ceil(perMinute * 4 / 3) }, (_, i) => {
      const t = w.between(0, spread)
      return { t: from + t, process: moving ? (w.chance(t / spread) ? 1 : 0) : i % 2, consumer: 0, cost: 1 }
    })
    // A clean network, as steady's: a reply later than the timeout sends requests to the outage policy (503), which is not stranding.
    const clean: Net = { base: w.between(0.05, 1), jitter: w.between(0, 1), slowChance: 0, slowMs: 0 }
    return { ...base, net: clean, processes: 2, seasoned: true, consumers: [c], arrivals, faults: [], duration: 10_000 }
  }
  const processes = int(w, 2, 3)
  const duration = family === 'data-loss' ? w.between(15_000, 50_000) : w.between(8_000, 100_000)
  const tail = family === 'long-tail'
  const count = tail ? int(w, 10, 30) : int(w, 1, 4)
  const month = w.chance(0.3)
  const costly = w.chance(0.3)
  const consumers = Array.from({ length: count }, (_, i) => consumer(w, `c${i}`, month))
  const s = { start, skew, duration, processes }
  let arrivals: Arrival[] = []
  consumers.forEach((c, i) => {
    const share = tail ? 1 / (i + 1) ** 1.1 : 1
    arrivals.push(...load(w, s, i, Math.max(1, Math.round(c.perMinute * share)), costly))
  })
  if (arrivals.length > MAX_ARRIVALS) arrivals = arrivals.filter(() => w.chance(MAX_ARRIVALS / arrivals.length))
  let fs = faults(w, start, duration, processes, int(w, 0, family === 'chaos' ? 5 : 2))
  let freeAgainAt: number | undefined
  if (family === 'data-loss') {
    // The load stops a second before Redis dies empty; a minute later the windows are empty by
    // truth, and a request must be admitted again (no lockout past the window: what is re-seeded
    // goes back into the buckets it was counted in, not into the moment of the re-seed).
    const kill = start + duration - 1_000
    fs = fs.filter((f) => f.at < kill - 3_000)
    fs.push({ kind: 'kill', at: kill, ms: w.between(20, 2000), keepData: false })
    freeAgainAt = kill + 61_500
    arrivals = arrivals.filter((a) => a.t < kill - 1_000)
    consumers.forEach((_, c) => { for (let k = 0; k < 3; k++) arrivals.push({ t: freeAgainAt! + k * 500, process: k % processes, consumer: c, cost: 1 }) })
    // Days far above the minutes: only the minute window can be full when the probes come.
    const roomyDays = consumers.map((c) => ({ ...c, perDay: c.perMinute * 50, perMonth: 0 }))
    return { ...base, policy: 'local', timeoutMs: 250, barrierMs: 2000, processes, consumers: roomyDays, arrivals, faults: fs, duration: freeAgainAt + 2_000 - start, freeAgainAt }
  }
  // A process that crashed took its ledger with it: a later loss of Redis's data cannot be re-seeded
  // with what it admitted (docs/limiter-internals.md states this double fault as outside the bound).
  if (fs.some((f) => f.kind === 'kill' && !f.keepData)) fs = fs.filter((f) => f.kind !== 'crash')
  const policy: StoreOnError = family === 'chaos' && w.chance(0.15) ? 'closed' : 'local'
  const timeoutMs = w.chance(0.7) ? 250 : int(w, 20, 400)
  const barrierMs = w.chance(0.7) ? 2000 : int(w, 1500, 3000)
  return { ...base, policy, timeoutMs, barrierMs, processes, consumers, arrivals, faults: fs, duration }
}
