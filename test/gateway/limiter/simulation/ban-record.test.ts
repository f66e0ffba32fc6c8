// The ban's record of recent 429s, in the simulator: a key flooded past its minute limit under ban policies from a
// threshold of 1 in a 1 s window to thousands in an hour, its refusals in calls of one to hundreds at instants drawn to
// fall on the record's bucket edges (a bucket's start, one millisecond either side, exactly one window after an
// earlier 429's bucket), at rates that keep the window's count near the threshold, so bans start, lapse and escalate.
// The real grant script runs on the simulator's Redis (virtual clock), and the in-process store on the same calls.
// Checked per schedule, for each store, against a reference written here from the stated rule
// (src/gateway/limiter/ban-record.ts), not from either store's code:
// (a) the record stays bounded: after every call at most BAN_RECORD_BUCKETS events of each kind (Redis's field) or
//     buckets (the process's record), however many 429s the window holds; Redis's field, rewritten by every call that
//     refuses, holds exactly the rule's buckets still in the window;
// (b) a ban starts exactly when the rule says: at the refused request for which more than `threshold` 429s sit in
//     buckets that start inside the window (a 429 counts for at least the window less one bucket and at most the
//     window), its length the policy's at its escalation level; a banned key's requests are answered banned and not
//     counted;
// (c) never earlier than an exact count of single 429s would ban (at the crossing request, more than `threshold` 429s
//     in the exact window).
// Before the buckets the field held one event per refusing call: a flood at a threshold of 1,000,000 grew it to
// thousands, and every refusal of the key reread it (1.9 ms of Redis a call).
// A family of the simulator's suite (test/helpers/sim/suite.ts runFamilies), `ban-record`: seeds fresh every run
// (printed); SIM_FAMILY=ban-record SIM_SEED=<seed> replays one; SIM_COUNT(S), TEST_LONG as for every family; its
// `# sim-result` line lets the mutation gate (mutants.ts) count it.
import t from 'tap'
import { BAN_RECORD_BUCKETS, banBucketMs } from '../../../../src/gateway/limiter/ban-record.js'
import { createMemoryStore } from '../../../../src/gateway/limiter/memory/store.js'
import { FIELD } from '../../../../src/gateway/limiter/redis/layout.js'
import { GRANT, grantArgs, grantKeys, readGrantReply, type GrantEntry } from '../../../../src/gateway/limiter/redis/scripts.js'
import type { BanPolicy } from '../../../../src/gateway/config/types.js'
import { SimRedis, type LuaVm } from '../../../helpers/sim/redis-model.js'
import { runFamilies, type ScheduleOutcome } from '../../../helpers/sim/suite.js'
import { World } from '../../../helpers/sim/world.js'

const YEAR_START = Date.UTC(2030, 0, 1)
const ESCALATION_MS = 86_400_000
const MAX_LEVEL = 40
const WINDOWS_SECONDS = [1, 2, 5, 60, 300, 3600]
const MAX_CALLS = 1_200
const KEY = 'rl:{flood}'

/** One grant call of the schedule: `requests` at virtual instant `at` (whole ms). */
interface Call { readonly at: number, readonly requests: number }

interface Schedule { readonly policy: BanPolicy, readonly minuteLimit: number, readonly calls: readonly Call[] }

/** Draws a threshold from 1 to 5,000, spread over the orders of magnitude. */
function thresholdOf (world: World): number {
  const magnitude = Math.floor(world.between(0, 4))
  return Math.max(1, Math.floor(10 ** magnitude * world.between(0.5, 5)))
}

function makeSchedule (world: World): Schedule {
  const threshold = thresholdOf(world)
  const windowSeconds = WINDOWS_SECONDS[Math.floor(world.between(0, WINDOWS_SECONDS.length))]!
  const windowMs = windowSeconds * 1000
  const durationSeconds = Math.max(1, Math.floor(windowSeconds * world.between(0.05, 0.5)))
  const policy: BanPolicy = { threshold, windowSeconds, durationSeconds, maxDurationSeconds: durationSeconds * 4 }
  const bucketMs = banBucketMs(windowMs)
  // Refusals at a rate that keeps the window's count near the threshold, in calls of up to a twentieth of it.
  const perMs = threshold * world.between(0.6, 1.6) / windowMs
  const largest = Math.max(1, Math.floor(threshold / (world.chance(0.3) ? 400 : 20))) // or a flood of small calls, several a bucket
  const calls: Call[] = []
  const earlier: number[] = []
  let at = YEAR_START + Math.floor(world.between(0, 360)) * 86_400_000 + Math.floor(world.between(0, 86_400_000))
  const end = at + windowMs * world.between(2.5, 4)
  let requests = 1
  let lastCrossing = at
  while (at < end && calls.length < MAX_CALLS) {
    calls.push({ at, requests })
    earlier.push(at)
    requests = 1 + Math.floor(world.between(0, largest))
    let next = at + Math.max(0, -Math.log(1 - world.random()) * requests / perMs)
    const edge = world.random()
    if (edge < 0.25) next = Math.ceil(next / bucketMs) * bucketMs + Math.floor(world.between(-1, 2)) // a bucket's edge
    else if (edge < 0.35) { // the next instant an earlier 429's bucket leaves the window, or a millisecond either side
      while (earlier.length > 1 && Math.floor(earlier[0]! / bucketMs) * bucketMs + windowMs <= at) earlier.shift()
      const offset = Math.floor(world.between(-1, 2))
      const edgeAt = Math.floor(earlier[0]! / bucketMs) * bucketMs + windowMs + offset
      if (edgeAt > at && edgeAt - at < 4 * (next - at)) {
        next = edgeAt
        // Now and then, once a window's record may have built up since the last ban, a call that crosses the threshold
        // exactly as a bucket leaves: the refusal that starts the ban shows whether that bucket still counted.
        if (offset === 0 && edgeAt - lastCrossing > windowMs + 4 * durationSeconds * 1000) {
          requests = threshold + 1
          lastCrossing = edgeAt
        }
      }
    }
    at = Math.max(at, Math.floor(next))
  }
  return { policy, minuteLimit: 1 + Math.floor(world.between(0, 5)), calls }
}

/**
 * The stated rule, kept from single 429s (one entry per instant, with its count): the store under test must start and
 * answer bans exactly as this does. Two cursors into the entries: the first inside the exact window, and the first
 * whose bucket starts inside it (the rule's count), each with the 429s from it on.
 */
class ReferenceBan {
  readonly #policy: BanPolicy
  readonly #windowMs: number
  readonly #bucketMs: number
  #times: number[] = []
  #counts: number[] = []
  #firstExact = 0
  #exactHeld = 0
  #firstCounted = 0
  #countedHeld = 0
  #until = 0
  #lastEnd = -Infinity
  #level = -1

  constructor (policy: BanPolicy) {
    this.#policy = policy
    this.#windowMs = policy.windowSeconds * 1000
    this.#bucketMs = banBucketMs(this.#windowMs)
  }

  bannedAt (now: number): boolean { return now < this.#until }

  get until (): number { return this.#until }

  #bucketOf (at: number): number { return Math.floor(at / this.#bucketMs) * this.#bucketMs }

  #slide (now: number): void {
    while (this.#firstExact < this.#times.length && this.#times[this.#firstExact]! <= now - this.#windowMs) this.#exactHeld -= this.#counts[this.#firstExact++]!
    while (this.#firstCounted < this.#times.length && this.#bucketOf(this.#times[this.#firstCounted]!) <= now - this.#windowMs) this.#countedHeld -= this.#counts[this.#firstCounted++]!
  }

  /** The record the rule keeps at `now`: 'bucketStart:count' per bucket still in the window, oldest first. */
  buckets (now: number): string[] {
    this.#slide(now)
    const counts = new Map<number, number>()
    for (let entry = this.#firstCounted; entry < this.#times.length; entry++) {
      const start = this.#bucketOf(this.#times[entry]!)
      counts.set(start, (counts.get(start) ?? 0) + this.#counts[entry]!)
    }
    return [...counts].map(([start, count]) => `${start}:${count}`)
  }

  /** Counts `refused` 429s at `now`; the 1-based one that starts a ban (0: none) and whether an exact count agreed. */
  refuse (now: number, refused: number): { startedBy: number, exactOver: boolean } {
    this.#slide(now)
    const startedBy = this.#countedHeld + refused > this.#policy.threshold ? this.#policy.threshold - this.#countedHeld + 1 : 0
    const added = startedBy > 0 ? startedBy : refused
    if (added === 0) return { startedBy, exactOver: true }
    if (this.#times.at(-1) === now) this.#counts[this.#counts.length - 1]! += added
    else { this.#times.push(now); this.#counts.push(added) }
    this.#exactHeld += added
    this.#countedHeld += added
    if (startedBy === 0) return { startedBy, exactOver: true }
    const exactOver = this.#exactHeld > this.#policy.threshold
    this.#level = now - this.#lastEnd < ESCALATION_MS ? this.#level + 1 : 0
    const maxMs = this.#policy.maxDurationSeconds * 1000
    this.#until = now + (this.#level < MAX_LEVEL ? Math.min(this.#policy.durationSeconds * 1000 * 2 ** this.#level, maxMs) : maxMs)
    this.#lastEnd = this.#until
    this.#times = []
    this.#counts = []
    this.#firstExact = this.#firstCounted = this.#exactHeld = this.#countedHeld = 0
    return { startedBy, exactOver }
  }
}

interface RecordOutcome extends ScheduleOutcome { readonly bans: number, readonly largestRecord: number, readonly peak429s: number }

/** Runs the schedule on the grant script (the simulator's Redis) and on the in-process store; every departure from the rule is a violation. */
async function run (seed: number, vm: LuaVm): Promise<RecordOutcome> {
  const world = new World(seed, 0)
  const schedule = makeSchedule(world)
  const { policy, minuteLimit, calls } = schedule
  const found: string[] = []
  let bans = 0
  let largestRecord = 0
  let peak429s = 0
  let requests = 0
  let admitted = 0

  // The grant script: one holder, no reserve, no blocks: every refusal is final and counted.
  world.now = calls[0]!.at
  const redis = new SimRedis(world, 0, vm)
  const script = new ReferenceBan(policy)
  const entryOf = (count: number): GrantEntry => ({
    key: KEY, minuteLimit, dayLimit: 10_000_000, monthLimit: 0, monthSoft: false, requests: count, cost: 1, extra: 0, reserve: 0, write: true,
    blocksBucket: -1, blocks: 0, ban: policy, adjustments: []
  })
  for (const [index, call] of calls.entries()) {
    world.now = call.at
    const entries = [entryOf(call.requests)]
    const { now, replies } = readGrantReply(redis.runScript(GRANT, grantKeys(entries), grantArgs('p0', entries)), 1)
    const reply = replies[0]!
    requests += call.requests
    admitted += reply.admitted
    const where = `redis call ${index} at +${now - calls[0]!.at} ms (${call.requests} requests)`
    if (script.bannedAt(now)) {
      if (reply.outcome !== 'key_banned' || reply.bannedUntil !== script.until) found.push(`(b) ${where}: banned until ${script.until}, answered ${reply.outcome} until ${reply.bannedUntil}`)
      continue
    }
    const expected = script.refuse(now, call.requests - reply.admitted)
    if (expected.startedBy > 0) bans++
    if (!expected.exactOver) found.push(`(c) ${where}: the rule bans where an exact count would not`)
    if (reply.bannedAt !== expected.startedBy || reply.bannedUntil !== (expected.startedBy > 0 ? script.until : 0)) {
      found.push(`(b) ${where}: the ban should start at refusal ${expected.startedBy} (until ${expected.startedBy > 0 ? script.until : 0}), started at ${reply.bannedAt} (until ${reply.bannedUntil})`)
    }
    const record = redis.peek(KEY, FIELD.recentRejections) ?? ''
    const events = record === '' ? [] : record.split(',')
    if (expected.startedBy === 0 && call.requests > reply.admitted && record !== script.buckets(now).join(',')) {
      found.push(`(a) ${where}: the field holds ${record}, the rule ${script.buckets(now).join(',')}`)
    }
    const counted = events.filter((event) => !event.endsWith('s'))
    let held = 0
    for (const event of counted) held += Number(event.split(':')[1])
    peak429s = Math.max(peak429s, held)
    largestRecord = Math.max(largestRecord, events.length)
    if (counted.length > BAN_RECORD_BUCKETS || events.length - counted.length > BAN_RECORD_BUCKETS) found.push(`(a) ${where}: ${events.length} events in the field`)
  }

  // The in-process store: the same calls, one consume per request.
  let clock = calls[0]!.at
  const memory = createMemoryStore({ now: () => clock })
  const inProcess = new ReferenceBan(policy)
  const ask = { limits: { perMinute: minuteLimit, perDay: 10_000_000 }, ban: policy, cost: 1, monthLimit: 0, overage: false }
  for (const [index, call] of calls.entries()) {
    clock = call.at
    const where = `in-process call ${index} at +${call.at - calls[0]!.at} ms`
    for (let request = 1; request <= call.requests; request++) {
      const result = await memory.consume('flood', ask)
      if (inProcess.bannedAt(clock)) {
        if (result.outcome !== 'key_banned' || result.bannedUntil !== inProcess.until) found.push(`(b) ${where}, request ${request}: banned until ${inProcess.until}, answered ${result.outcome}`)
        continue
      }
      if (result.outcome === 'ok') continue
      const expected = inProcess.refuse(clock, 1)
      if (!expected.exactOver) found.push(`(c) ${where}: the rule bans where an exact count would not`)
      const should = expected.startedBy > 0 ? 'ban_started' : 'rate_limited'
      if (result.outcome !== should || (expected.startedBy > 0 && result.bannedUntil !== inProcess.until)) found.push(`(b) ${where}, request ${request}: expected ${should}, answered ${result.outcome}`)
    }
  }

  return {
    violations: found,
    unanswered: 0,
    requests,
    admitted,
    bans,
    largestRecord,
    peak429s,
    describe: () => `seed ${seed}: ban ${policy.threshold} in ${policy.windowSeconds} s (${policy.durationSeconds}–${policy.maxDurationSeconds} s), ${minuteLimit}/min, ${calls.length} calls, ${requests} requests over ${((calls.at(-1)!.at - calls[0]!.at) / 1000).toFixed(1)} s: ${bans} bans, at most ${peak429s} 429s held in ${largestRecord} events${found.length > 0 ? `; ${found.slice(0, 5).join('; ')}` : ''}`
  }
}

let schedules = 0
let banned = 0
let mostEvents = 0
let most429s = 0
await runFamilies(t, 'test/gateway/limiter/simulation/ban-record.test.ts', [{
  family: 'ban-record',
  count: 60,
  longCount: 400,
  schedule: run,
  check (t, r) {
    schedules++
    if (r.bans > 0) banned++
    mostEvents = Math.max(mostEvents, r.largestRecord)
    most429s = Math.max(most429s, r.peak429s)
    t.ok(r.largestRecord <= 2 * BAN_RECORD_BUCKETS, `the field at most ${2 * BAN_RECORD_BUCKETS} events (${r.largestRecord})`)
  }
}])
t.comment(`ban-record: ${schedules} schedules, ${banned} with a ban; the largest field ${mostEvents} events, holding up to ${most429s} 429s`)
// The generator's aim, over a run of many schedules (a replayed seed or a stopped gate run has too few to say): bans start.
if (schedules >= 20) t.ok(banned >= schedules / 4, `bans start and lapse in many schedules (${banned} of ${schedules}): the rule's edges are exercised`)
