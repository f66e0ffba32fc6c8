// The real burst's shape (test/gateway/edge/burst-shedding.test.ts): a fresh consumer's burst of 4/3 of its minute
// limit from two or three processes at once, on a key with the plans' ban policy (more than 30 429s a minute bans it),
// so every burst starts a ban while it is still being decided; under heavier load than burst-stalled-holders: every
// loop blocked around each of the first six second boundaries for 100–1,200 ms (or two such stalls back to back),
// from 600 ms before it to 50 ms after, and now and then a message 30–100 ms slow. A ban that started while refusals
// waited for blocks held elsewhere used to answer them at once, so the units those blocks gave back at their second's
// end went to nobody (docs/limiter-internals.md, "A ban that starts mid-burst").
// Checked per schedule: (a) no rolling window over the limit; (b) the burst admitted to its limit exactly; (c) every
// request answered within BLOCK_HELD_BUCKETS + 1 s and GIVE_BACK_MARGIN_MS of its arrival, not counting its own loop's
// stalls; (d) exactly one ban started (its final 429s, a third of the limit, are past the threshold: a flood is still
// banned). Seeds fresh every run (printed), SIM_SEED=<seed> replays one; TEST_LONG runs 5 times as many.
import t from 'tap'
import { BLOCK_HELD_BUCKETS } from '../../../../src/gateway/limiter/redis/layout.js'
import { burstSeeds, PRO_BAN, runBurst, type BurstLoad } from '../../../helpers/sim/burst-world.js'
import { createLuaVm } from '../../../helpers/sim/redis-model.js'
import { longOr } from '../../../helpers/long.js'

const COUNT = Number(process.env.SIM_COUNT ?? longOr(150, 750))
const WAIT_BOUND_MS = (BLOCK_HELD_BUCKETS + 1) * 1000 + 100

const LOAD: BurstLoad = {
  processes: [2, 3],
  spreadMs: 1000,
  movingChance: 0,
  stallMs: [100, 1200],
  stallStart: [-600, 50],
  stallChance: 1,
  twiceChance: 0.5,
  gapMs: 100,
  seconds: 6,
  limit: [150, 401],
  ban: PRO_BAN,
  slow: { chance: 0.05, ms: [30, 100] }
}

const vm = await createLuaVm()
const seeds = burstSeeds(COUNT, (line) => { t.comment(line) })
let short = 0
let fewest = 1
let unbanned = 0
let longestUnblocked = 0
for (const seed of seeds) {
  const r = await runBurst(seed, vm, LOAD)
  longestUnblocked = Math.max(longestUnblocked, r.longestUnblockedWait)
  if (r.admitted < r.limit) short++
  fewest = Math.min(fewest, r.admitted / r.limit)
  if (r.bans !== 1) unbanned++
  const failed = r.over > 0 || r.unanswered > 0 || r.admitted < r.limit || r.longestUnblockedWait > WAIT_BOUND_MS || r.bans !== 1
  if (failed) t.comment(`${r.describe}: admitted ${r.admitted}, longest wait ${r.longestWait.toFixed(0)} ms (${r.longestUnblockedWait.toFixed(0)} ms unblocked)`)
  if (r.over > 0) t.fail(`seed ${seed}: (a) ${r.over} over the limit`)
  if (r.unanswered > 0) t.fail(`seed ${seed}: ${r.unanswered} requests never answered`)
  if (r.admitted < r.limit) t.fail(`seed ${seed}: (b) ${r.admitted} of ${r.limit} admitted`)
  if (r.longestUnblockedWait > WAIT_BOUND_MS) t.fail(`seed ${seed}: (c) a request waited ${r.longestUnblockedWait.toFixed(0)} ms with its loop running (bound ${WAIT_BOUND_MS})`)
  if (r.bans !== 1) t.fail(`seed ${seed}: (d) ${r.bans} bans started (one expected: ${r.requests - r.admitted} refused)`)
}
t.pass(`${seeds.length} schedules: ${short} short of the limit (fewest ${(fewest * 100).toFixed(1)} %), ${unbanned} without exactly one ban; longest wait ${longestUnblocked.toFixed(0)} ms with the loop running (bound ${WAIT_BOUND_MS})`)
t.comment(`${short} of ${seeds.length} bursts short (fewest ${(fewest * 100).toFixed(1)} % of the limit); ${unbanned} without exactly one ban`)
