// Schedules that reach the limiter's timing (issue 37): the default families run 8–100 s with at
// most 250 requests, so a minute window rarely slides under a consumer at its limit, recovery is
// seen with no traffic on one side of the barrier, no schedule crosses a month's or a day's end with
// the limits that matter there, Redis's clock never steps, and no outage outlasts the reserve's cover.
// Each family here aims at one of those:
// - `sliding`: several consumers at 1–3 × their minute limits for 150–200 s, spread over processes and
//   moving between them, so every minute window slides at the limit for minutes;
// - `recovery`: Redis killed (data kept or lost) and links reset while traffic at the limit goes on,
//   so requests meet the shard on both sides of the recovery barrier;
// - `calendar`: a rolling day sliding into a month's last day under a hard month (the day, the month's
//   last day and the month's limit binding in one schedule); a month's end (or its last day's start)
//   crossed at a month limit, hard or soft; or a day window sliding at any hour: a consumer that used
//   its day comes back 24 h later, around the instant its first requests leave the window. A leap
//   year's February now and then (function `calendar`, below);
// - `clock`: Redis's clock drifts at a realistic rate (under the 1,000 ppm the bound allows) and steps
//   forward or back; a forward step is outside the invariant, so those schedules check its stated
//   bound (every window by Redis's clock, shortened by the step: docs/limiter-internals.md);
// - `long-outage`: one process partitioned, or Redis paused or down, for 60–150 s — longer than the
//   reserve's 58 s of cover — while traffic goes on everywhere; or that process's link slower than the
//   call budget while the others are served at once (its calls time out and are answered late).
// - `drift-edge`: Redis's clock faster than every process's, at 80–99 % of the 1,000 ppm the clock bound
//   allows (redis/clock.ts), after a silence that lets the bound age; then pools spent at the last instant
//   the process's bound allows in a second, and a minute later, with the window at the limit, bursts at the
//   first instant of the same seconds: a bound that does not widen for drift spends a unit in the next
//   second by Redis's clock, which Redis forgets a minute after the second it was counted in.
// - `reserve-edge`: a busy consumer's process cut off for a few seconds, admitting from its reserve across
//   them; a minute later, the window at the limit, bursts at the first instant of those seconds: a reserve
//   admission written back into an earlier second than its own leaves Redis's ring while still in the window.
// Everything is drawn from the world's random stream, so a seed is a schedule.
import type { StoreOnError } from '../../../src/gateway/limiter/redis/outage.js'
import type { World } from './world.js'
import { boundary, DEFAULT_BAN, int, net, type Arrival, type Consumer, type Fault, type Schedule, type TimingFamily } from './schedules.js'

const DAY_MS = 86_400_000

/** Poisson arrivals of `consumer` in [from, to) at `perSecond`, at `process` (or a random one of `processes`). */
export function stream (w: World, consumer: number, from: number, to: number, perSecond: number, processes: number, process = -1, costly = false): Arrival[] {
  const out: Arrival[] = []
  if (perSecond <= 0) return out
  for (let t = from - Math.log(1 - w.random()) * 1000 / perSecond; t < to; t += -Math.log(1 - w.random()) * 1000 / perSecond) {
    out.push({ t, process: process >= 0 ? process : int(w, 0, processes - 1), consumer, cost: costly && w.chance(0.3) ? int(w, 2, 3) : 1 })
  }
  return out
}

/**
 * A consumer at 0.5–3 × its minute limit in phases of 15–60 s, each phase spread over the processes or
 * stuck to one (traffic moving between processes), with bursts on second boundaries now and then.
 */
export function atLimit (w: World, consumer: number, c: Consumer, s: { start: number, skew: number, end: number, processes: number, drift?: number }, costly: boolean): Arrival[] {
  // Second boundaries by Redis's clock, which may drift (it started drifting 5 s before the start: run.ts).
  const edge = (k: number): number => s.drift === undefined ? boundary(s.start, s.skew, k) : (boundary(s.start, s.skew, k) + s.drift * (s.start - 5000)) / (1 + s.drift)
  const out: Arrival[] = []
  for (let from = s.start + w.between(0, 2000); from < s.end;) {
    const to = Math.min(s.end, from + w.between(15_000, 60_000))
    const sticky = w.chance(0.4) ? int(w, 0, s.processes - 1) : -1
    out.push(...stream(w, consumer, from, to, w.between(0.5, 3) * c.perMinute / 60, s.processes, sticky, costly))
    if (w.chance(0.3)) {
      const size = int(w, 1, Math.max(1, Math.floor(c.perMinute / 4)))
      for (let k = Math.ceil((from - s.start) / 1000); edge(k) < to; k += int(w, 1, 5)) {
        for (let i = 0; i < size; i++) out.push({ t: edge(k) + w.between(0, 3), process: sticky >= 0 ? sticky : int(w, 0, s.processes - 1), consumer, cost: 1 })
      }
    }
    from = to
  }
  return out
}

/** A consumer whose minute limit is what binds: day far above it (or, now and then, a few minutes' worth), no month. */
export function minuteConsumer (w: World, id: string, perMinute: number): Consumer {
  const perDay = w.chance(0.7) ? perMinute * int(w, 20, 200) : Math.floor(perMinute * w.between(2, 4))
  return { id, perMinute, perDay, perMonth: 0, overage: false, ban: w.chance(0.8) ? null : DEFAULT_BAN }
}

/** Light faults that leave the windows sliding: short pauses, stalls, link resets. */
function lightFaults (w: World, start: number, duration: number, processes: number, n: number): Fault[] {
  return Array.from({ length: n }, (): Fault => {
    const at = start + w.between(0, duration)
    const kind = w.random()
    if (kind < 0.35) return { kind: 'pause', at, ms: w.between(20, 400) }
    if (kind < 0.7) return { kind: 'stall', at, process: int(w, 0, processes - 1), ms: w.between(10, 300) }
    return { kind: 'reset', at, process: int(w, 0, processes - 1) }
  })
}

export function makeTimingSchedule (w: World, family: TimingFamily, drawnStart: number): Schedule {
  const skew = w.between(-5000, 5000)
  const base = { family, policy: 'local' as StoreOnError, timeoutMs: 250, barrierMs: 2000, net: net(w), skew, seasoned: w.chance(0.7), steady: false }
  if (family === 'sliding' || family === 'clock') {
    const start = drawnStart
    const processes = int(w, 2, 3)
    const duration = family === 'sliding' ? w.between(150_000, 180_000) : w.between(100_000, 160_000)
    const consumers = Array.from({ length: int(w, 1, 3) }, (_, i) => minuteConsumer(w, `c${i}`, int(w, 6, 90)))
    // Redis's clock (`clock`): a drift within the bound always; steps forward (checked by Redis's clock, windows
    // shortened by the steps) or back (windows only grow in real time: checked by the world's).
    const forward = family === 'clock' && w.chance(0.6)
    const redisDrift = family === 'sliding' ? undefined : forward ? w.between(-5e-4, 5e-4) : w.between(-5e-4, 0)
    const s = { start, skew, end: start + duration, processes, ...(redisDrift === undefined ? {} : { drift: redisDrift }) }
    const arrivals = consumers.flatMap((c, i) => atLimit(w, i, c, s, w.chance(0.2)))
    const faults = lightFaults(w, start, duration, processes, int(w, 0, 2))
    if (family === 'sliding') return { ...base, processes, consumers, arrivals, faults, duration }
    const steps = w.chance(forward ? 0.5 : 1) ? int(w, 1, 2) : 0
    let stepped = 0
    for (let i = 0; i < steps; i++) {
      const ms = forward ? w.between(5, 300) : -w.between(50, 5000)
      stepped += Math.max(0, ms)
      faults.push({ kind: 'clock', at: start + w.between(10_000, duration - 10_000), ms })
    }
    return { ...base, processes, consumers, arrivals, faults, duration, redisDrift, ...(forward ? { checkBy: { clock: 'redis' as const, slackMs: stepped } } : {}) }
  }
  if (family === 'drift-edge') return driftEdge(w, base, drawnStart)
  if (family === 'reserve-edge') return reserveEdge(w, base, drawnStart)
  if (family === 'reseed-edge') return reseedEdge(w, base, drawnStart)
  if (family === 'recovery') {
    const start = drawnStart
    const processes = int(w, 2, 3)
    const duration = w.between(40_000, 90_000)
    // At their limits, and now and then a consumer busy with room to spare (it holds a reserve, which is re-seeded).
    const consumers = Array.from({ length: int(w, 1, 3) }, (_, i) => w.chance(0.35)
      ? { id: `r${i}`, perMinute: int(w, 200, 500), perDay: 100_000, perMonth: 0, overage: false, ban: null }
      : minuteConsumer(w, `c${i}`, int(w, 10, 90)))
    const s = { start, skew, end: start + duration, processes }
    const arrivals = consumers.flatMap((c, i) => c.id.startsWith('r')
      ? stream(w, i, start, start + duration, w.between(2, 5), processes)
      : atLimit(w, i, c, s, false))
    // Kills with traffic going on: short ones (requests on both sides of the barrier), data kept or lost.
    // No process crashes: a crashed process's ledger cannot be re-seeded (outside the bound).
    const faults: Fault[] = Array.from({ length: int(w, 1, 3) }, () => ({ kind: 'kill' as const, at: start + w.between(5_000, duration - 10_000), ms: w.chance(0.5) ? w.between(20, 400) : w.between(400, 3000), keepData: w.chance(0.4) }))
    faults.push(...lightFaults(w, start, duration, processes, int(w, 0, 2)))
    return { ...base, processes, consumers, arrivals, faults, duration }
  }
  if (family === 'calendar') return calendar(w, base, drawnStart)
  // long-outage: a consumer busy on process 0 holds a reserve; then that process is cut off (or Redis
  // pauses or dies, data kept) for 60–150 s, longer than the reserve's cover, while the traffic goes on
  // and the other processes bring the consumer to its limit.
  const start = drawnStart
  const processes = int(w, 2, 3)
  const perMinute = int(w, 80, 180)
  const consumers: Consumer[] = [{ id: 'hot', perMinute, perDay: perMinute * int(w, 10, 100), perMonth: 0, overage: false, ban: null }]
  const kind = w.random()
  const partition = kind < 0.45
  const slow = kind >= 0.45 && kind < 0.7
  // Cut off, the consumer's traffic there may slow to a trickle, so its reserve would last past the cover; the
  // cut then outlasts the reserve itself (Redis drops it 120 s after its last renewal). Aimed (29 Nov): the
  // reserve is a quarter of the room (redis/calls.ts), so before such a cut process 0 runs at 30–70 % of the
  // limit (at 2–4/s it used the room itself and held next to nothing), and the trickle (0.05–0.25/s) spends
  // under half of it in the cover's 58 s: units are left to spend in the minute after the cover, where a
  // reserve spent past its cover shows. 70 % of the partitions (was 50 %; the trickle 0.15–0.5/s).
  const trickle = partition && w.chance(0.7) ? w.between(0.05, 0.25) : undefined
  const outageAt = start + w.between(8_000, 20_000)
  const outageMs = trickle === undefined ? w.between(60_000, 150_000) : w.between(125_000, 180_000)
  const end = outageAt + outageMs + w.between(30_000, 70_000)
  // Or process 0's link stays up but slower than the budget (300 ms–1.5 s more, 10–60 s) while the others,
  // served at once, bring the consumer to its limit: its calls time out and are answered late.
  if (slow) {
    const slowMs = w.between(10_000, 60_000)
    const elsewhere: Arrival[] = []
    for (let p = 1; p < processes; p++) elsewhere.push(...stream(w, 0, start, outageAt + slowMs + 20_000, w.between(1, 2.5) * perMinute / 60 / (processes - 1), processes, p))
    const fromP0 = stream(w, 0, start, outageAt + slowMs + 20_000, w.between(2, 4), processes, 0)
    return { ...base, processes, consumers, arrivals: [...fromP0, ...elsewhere], faults: [{ kind: 'slow', at: outageAt, process: 0, ms: slowMs, delay: w.between(300, 1500) }], duration: outageAt + slowMs + 20_000 - start }
  }
  // Now and then the consumer goes quiet on process 0 just before Redis stalls: the sweep's call that hands its
  // reserve back meets the stalled Redis (in flight, applied or not), and the consumer comes back during the outage.
  const quiet = !partition && !slow && w.chance(0.5) ? outageAt - w.between(1_500, 2_000) : undefined
  const rate0 = trickle === undefined ? w.between(2, 4) : w.between(0.3, 0.7) * perMinute / 60
  const arrivals = quiet !== undefined
    ? [...stream(w, 0, start, quiet, rate0, processes, 0), ...stream(w, 0, outageAt + w.between(300, 3_000), end, rate0, processes, 0)]
    : trickle !== undefined
      ? [...stream(w, 0, start, outageAt, rate0, processes, 0), ...stream(w, 0, outageAt, outageAt + outageMs, trickle, processes, 0), ...stream(w, 0, outageAt + outageMs, end, rate0, processes, 0)]
      : stream(w, 0, start, end, rate0, processes, 0)
  // Partitioned: the others start during the cut. Redis gone: they run before it too, at under the limit,
  // so the room (and the reserve process 0 asks for, a quarter of it) shrinks call by call up to the outage.
  const others = partition ? outageAt + w.between(0, 60_000) : outageAt + outageMs
  for (let p = 1; p < processes; p++) {
    if (!partition) arrivals.push(...stream(w, 0, start, outageAt, w.between(0.3, 0.9) * perMinute / 60 / (processes - 1), processes, p))
    arrivals.push(...stream(w, 0, others, end, w.between(trickle === undefined ? 0.5 : 1.2, 2) * perMinute / 60 / (processes - 1), processes, p))
  }
  const faults: Fault[] = [partition
    ? { kind: 'partition', at: outageAt, process: 0, ms: outageMs }
    : w.chance(0.5) ? { kind: 'pause', at: outageAt, ms: outageMs } : { kind: 'kill', at: outageAt, ms: outageMs, keepData: true }]
  if (!partition) for (let p = 1; p < processes; p++) arrivals.push(...stream(w, 0, outageAt, outageAt + outageMs, w.between(1, 3), processes, p))
  return { ...base, processes, consumers, arrivals, faults, duration: end - start }
}

/** A leap year's February (the sim's own year, 2030, has none), where a leap day is crossed. */
const LEAP_FEBRUARY = { year: 2032, month: 1 }

/**
 * `calendar`, aimed at the instants a calendar bug shows at (a month's end, its last day's start, a rolling
 * day's end; for the first two kinds below, a leap year's February in 30 % of the schedules), each check by Redis's clock (it decides which
 * month a request is in). Three kinds:
 * - 45 %, a rolling day sliding into a month's last day: a consumer with a hard month of 1.2–1.8 × its day
 *   (85 %; soft otherwise) uses its day 17 min–12 h into the month's second-to-last day, and comes back 24 h
 *   later, in the last day, in bursts around the instant those units leave the rolling day. The day, the
 *   month's last day and a hard month all bind in one schedule: the day window is held exactly as it slides,
 *   and the month's room is what is left of it, not a new month's;
 * - 35 %, a month's end or its last day's start crossed at month limits (hard or soft), the month half used
 *   minutes before;
 * - 20 %, a day window sliding at any hour: a consumer that used its day comes back 24 h later, around the
 *   instant its first requests leave the window.
 * Before 29 Nov only the last two (half each, drawn in 2030): a month's last day was crossed at a hard month
 * with a day above it in about one schedule in eight, so the family needed 40 schedules (docs/development.md).
 */
function calendar (w: World, base: Omit<Schedule, 'processes' | 'consumers' | 'arrivals' | 'faults' | 'duration'>, drawnStart: number): Schedule {
  const processes = int(w, 2, 3)
  const kind = w.random()
  const drawn = new Date(drawnStart)
  const leap = w.chance(0.3)
  const monthEnd = leap
    ? Date.UTC(LEAP_FEBRUARY.year, LEAP_FEBRUARY.month + 1, 1)
    : Date.UTC(drawn.getUTCFullYear(), drawn.getUTCMonth() + 1, 1)
  const lastDayStart = monthEnd - DAY_MS
  if (kind < 0.35) {
    // A month's end, or its last day's start, crossed at month limits (hard or soft), the month half
    // used a few minutes before.
    const crossing = w.chance(0.5) ? monthEnd : lastDayStart
    const start = crossing - w.between(5 * 60_000, 10 * 60_000)
    const consumers = Array.from({ length: int(w, 1, 3) }, (_, i): Consumer => {
      const perMonth = int(w, 10, 80)
      return { id: `m${i}`, perMinute: int(w, 10, 60), perDay: perMonth * int(w, 1, 3), perMonth, overage: w.chance(0.3), ban: null }
    })
    const arrivals: Arrival[] = []
    consumers.forEach((c, i) => {
      arrivals.push(...stream(w, i, start, start + 20_000, Math.min(c.perMinute, c.perMonth * w.between(0.3, 0.9)) / 20, processes))
      arrivals.push(...stream(w, i, crossing - w.between(10_000, 40_000), crossing + w.between(10_000, 40_000), w.between(1, 3) * c.perMinute / 60, processes))
    })
    return { ...base, processes, consumers, arrivals, faults: lightFaults(w, start, crossing - start, processes, int(w, 0, 2)), duration: crossing + 45_000 - start, start, checkBy: { clock: 'redis', slackMs: 0 } }
  }
  // A day window sliding: the day used at the start, then bursts every 20–90 s around the instant, 24 h
  // later, when the first requests leave the rolling day (the 15-minute bucket they are in ends a little
  // later). Into a month's last day (its second-to-last day used), or at any hour of the drawn day.
  const intoLastDay = kind < 0.8
  const start = intoLastDay ? lastDayStart - DAY_MS + w.between(17 * 60_000, 12 * 3_600_000) : drawnStart
  const perDay = int(w, 10, 40)
  const hardMonth = w.chance(0.85)
  const c: Consumer = intoLastDay
    ? { id: 'day', perMinute: perDay + int(w, 0, perDay), perDay, perMonth: Math.floor(perDay * w.between(1.2, 1.8)), overage: !hardMonth, ban: null }
    : { id: 'day', perMinute: perDay + int(w, 0, perDay), perDay, perMonth: w.chance(0.3) ? perDay * 5 : 0, overage: true, ban: null }
  const firstMs = w.between(1000, 5000)
  const arrivals = stream(w, 0, start, start + firstMs, intoLastDay ? perDay * w.between(1, 2) / (firstMs / 1000) : perDay * w.between(0.5, 1.2) / 3, processes)
  for (let t = start + DAY_MS - 16 * 60_000 + w.between(0, 30_000); t < start + DAY_MS + 16 * 60_000; t += w.between(20_000, 90_000)) {
    const size = int(w, 1, Math.ceil(perDay / 3))
    for (let i = 0; i < size; i++) arrivals.push({ t: t + w.between(0, 500), process: int(w, 0, processes - 1), consumer: 0, cost: 1 })
  }
  // The processes stop after the first burst and new ones start 20 min before the second phase (a
  // deployment overnight; no data is lost, so their ledgers are not needed): the day in between costs nothing to simulate.
  const faults: Fault[] = Array.from({ length: processes }, (_, p) => ({ kind: 'crash' as const, at: start + 8_000, process: p, restartAfter: DAY_MS - 28 * 60_000 }))
  return { ...base, seasoned: true, processes, consumers: [c], arrivals, faults, duration: DAY_MS + 17 * 60_000, start, checkBy: { clock: 'redis', slackMs: 0 } }
}

/** Redis's drift and the processes' (each drawn in the range): Redis faster by 800–990 ppm of process time, under the 1,000 the bound allows. */
const EDGE_REDIS_DRIFT = { min: 6.5e-4, max: 7.4e-4 }
const EDGE_PROCESS_DRIFT = { min: -2.5e-4, max: -1.5e-4 }

/**
 * `drift-edge`: a process's bound on Redis's clock aged by 80–120 s of silence while Redis runs faster by
 * 800–990 ppm; then 1–2 consumers busy (1.5–3 × their limits) for a minute and more, with late bursts in
 * the first seconds (at the instant, just before the process's bound says the second ends, that a bound
 * not widened for drift would still let a pool unit of the second before be spent: up to the drift so far)
 * and, 60 s later by Redis's clock, bursts at those seconds' first millisecond, when the bucket the late
 * units were counted in leaves the ring while they are still in the window. Inside the invariant (drift
 * under the bound): checked exactly, by Redis's clock.
 */
function driftEdge (w: World, base: Omit<Schedule, 'processes' | 'consumers' | 'arrivals' | 'faults' | 'duration'>, start: number): Schedule {
  const processes = int(w, 2, 3)
  const redisDrift = w.between(EDGE_REDIS_DRIFT.min, EDGE_REDIS_DRIFT.max)
  const s = { start, skew: base.skew, drift: redisDrift }
  // World instant of Redis's second edge k (counted from the start; Redis's clock drifts from 5 s before it: run.ts).
  const edge = (k: number): number => (boundary(start, s.skew, k) + redisDrift * (start - 5000)) / (1 + redisDrift)
  // How far a bound learned at the processes' start and never widened lags Redis's clock at world instant t.
  const lagAt = (t: number): number => (redisDrift - EDGE_PROCESS_DRIFT.max) * (t - (start - 5000))
  const firstEdge = Math.floor(w.between(80, 120))
  const edges = int(w, 4, 8)
  const consumers = Array.from({ length: int(w, 1, 2) }, (_, i): Consumer => {
    const perMinute = int(w, 120, 300)
    return { id: `d${i}`, perMinute, perDay: perMinute * int(w, 20, 100), perMonth: 0, overage: false, ban: null }
  })
  const arrivals: Arrival[] = []
  const end = edge(firstEdge + 60 + edges) + 2000
  consumers.forEach((c, i) => {
    const hot = int(w, 0, processes - 1)
    // Busy from 3 s before the first late burst to after the last early one: the window fills to the limit on the way.
    arrivals.push(...stream(w, i, edge(firstEdge) - 3000, end, w.between(1.5, 3) * c.perMinute / 60, processes))
    // The process holding the pools: hot there (blocks come only at HOT_RATE and more).
    arrivals.push(...stream(w, i, edge(firstEdge) - 3000, edge(firstEdge + edges), w.between(3, 6), processes, hot))
    for (let k = firstEdge; k < firstEdge + edges; k++) {
      const lag = lagAt(edge(k))
      for (let j = int(w, 1, 3); j > 0; j--) arrivals.push({ t: edge(k) + w.between(0.1, 0.95) * lag, process: hot, consumer: i, cost: 1 })
      const size = int(w, Math.ceil(c.perMinute / 20), Math.ceil(c.perMinute / 8))
      const early = int(w, 0, processes - 1)
      for (let j = 0; j < size; j++) arrivals.push({ t: edge(k + 60) + w.between(0, 0.5), process: early, consumer: i, cost: 1 })
    }
  })
  arrivals.sort((a, b) => a.t - b.t)
  return { ...base, seasoned: true, processes, consumers, arrivals, faults: [], duration: end - start, redisDrift, processDrift: EDGE_PROCESS_DRIFT, checkBy: { clock: 'redis', slackMs: 0 } }
}

/**
 * `reserve-edge`: one consumer busy (4–7 a second) on one process with room to spare, so that process holds
 * a reserve; the process is cut off for 2–6 s and admits from the reserve across those seconds; the others
 * bring the consumer to its limit (1.5–3 × it); 60 s after the cut, bursts at the first instant of each of its
 * seconds take the room the ring frees as the bucket the reserve admissions were written into leaves it.
 * Inside the invariant (a reserve admission is within the limit): checked exactly.
 */
function reserveEdge (w: World, base: Omit<Schedule, 'processes' | 'consumers' | 'arrivals' | 'faults' | 'duration'>, start: number): Schedule {
  const processes = int(w, 2, 3)
  const edge = (k: number): number => boundary(start, base.skew, k)
  const perMinute = int(w, 150, 300)
  const consumers: Consumer[] = [{ id: 'r', perMinute, perDay: perMinute * int(w, 20, 100), perMonth: 0, overage: false, ban: null }]
  if (w.chance(0.5)) {
    // Or no cut: process 0's link turns slower than the call budget (300 ms–1.5 s more, for 2–6 s) just as Redis
    // runs a call of that process that lowered its reserve (the others' traffic shrinks the room, so the reserve
    // it asks for falls, to nothing once the room is under 10 s of its rate): the process goes into its outage
    // with that call in flight and applied, and may spend only the lower figure (the reserve cap) until the late
    // reply comes, the rest being the others' already.
    const slowMs = w.between(2_000, 6_000)
    const end = start + w.between(70_000, 80_000)
    const arrivals: Arrival[] = [...stream(w, 0, start, end, w.between(4, 7), processes, 0)]
    const othersFrom = start + w.between(2_000, 5_000)
    // The others flood (4–8 × the limit): the room the lowered reserve hands back is theirs before the reply comes.
    for (let p = 1; p < processes; p++) arrivals.push(...stream(w, 0, othersFrom, end, w.between(4, 8) * perMinute / 60 / (processes - 1), processes, p))
    return { ...base, processes, consumers, arrivals, faults: [{ kind: 'slow', at: start + 1_000, process: 0, ms: slowMs, delay: w.between(300, 1_500), onReserveDrop: true }], duration: end - start }
  }
  const cutAt = start + w.between(4_000, 8_000)
  const cutMs = w.between(2_000, 6_000)
  const first = Math.ceil((cutAt - edge(0)) / 1000)
  const last = Math.floor((cutAt + cutMs - edge(0)) / 1000) - 1
  const end = edge(last + 60) + 2000
  const arrivals: Arrival[] = [...stream(w, 0, start, cutAt + cutMs + 3_000, w.between(4, 7), processes, 0)]
  for (let p = 1; p < processes; p++) arrivals.push(...stream(w, 0, cutAt, end, w.between(1.5, 3) * perMinute / 60 / (processes - 1), processes, p))
  for (let k = first; k <= last; k++) {
    const size = int(w, Math.ceil(perMinute / 20), Math.ceil(perMinute / 8))
    const at = int(w, 1, processes - 1)
    for (let j = 0; j < size; j++) arrivals.push({ t: edge(k + 60) + w.between(0, 0.5), process: at, consumer: 0, cost: 1 })
  }
  return { ...base, processes, consumers, arrivals, faults: [{ kind: 'partition', at: cutAt, process: 0, ms: cutMs }], duration: end - start }
}

/**
 * `reseed-edge`: Redis loses its data 30–200 ms into a second in which a busy consumer's process (4–10 a second)
 * holds a pool, and is back 20–100 ms later, so the processes re-seed inside the pool's second; in half the
 * schedules Redis dies again (data kept, 20–400 ms) as the 1st…nth re-seed call arrives, so that process's
 * re-seed fails and must run again at its next recovery (the loss is still news to it). Traffic runs on both
 * sides of the loss: under the limit before, 1.5–3 × it for the minute after, so every unit the re-seeded
 * Redis does not count shows. Inside the invariant (one Redis, no process crashed): checked exactly.
 */
function reseedEdge (w: World, base: Omit<Schedule, 'processes' | 'consumers' | 'arrivals' | 'faults' | 'duration'>, start: number): Schedule {
  const processes = int(w, 2, 3)
  const perMinute = int(w, 200, 400)
  const consumers: Consumer[] = [{ id: 'l', perMinute, perDay: perMinute * int(w, 20, 100), perMonth: 0, overage: false, ban: null }]
  const lossAt = boundary(start, base.skew, int(w, 4, 10)) + w.between(30, 200)
  const end = lossAt + w.between(65_000, 75_000)
  const arrivals = stream(w, 0, start, end, w.between(4, 10), processes, 0)
  for (let p = 1; p < processes; p++) {
    arrivals.push(...stream(w, 0, start, lossAt, w.between(0.2, 0.6) * perMinute / 60 / (processes - 1), processes, p))
    arrivals.push(...stream(w, 0, lossAt, end, w.between(1.5, 3) * perMinute / 60 / (processes - 1), processes, p))
  }
  const reseedCut = w.chance(0.5) ? { reseedCut: { nth: int(w, 1, processes), ms: w.between(20, 400) } } : {}
  return { ...base, seasoned: true, processes, consumers, arrivals, faults: [{ kind: 'kill', at: lossAt, ms: w.between(20, 100), keepData: false, ...reseedCut }], duration: end - start }
}
