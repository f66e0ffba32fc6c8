// `npm run bench:history`: what shadow limits and the usage history cost. (1) On the hot path, in
// this process: CPU ns per decision of decide() without and with a shadow (every decision a shadow
// rejection, the costlier branch), and of the tally's note() for one hot consumer and for 1,000, and
// for one consumer with a monthly quota spending 5 units past it (overage: allow), batches
// alternated and the median of per-round differences taken (the machine is shared). (2) In Redis (a
// real redis-server): MEMORY USAGE of a consumer's full month of usage history, without and with
// units and overage, and of the shadow records of 1,000 consumers in one hour, per consumer; and the
// wall and CPU time of a flush of 1,000 consumers' cells. Writes bench/results/history-cost.json.
// Env: BENCH_ROUNDS [15] BENCH_BATCH [200000].
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import type { KeyRecord, Limits } from '../src/gateway/config/types.js'
import { hourOf } from '../src/gateway/history/days.js'
import { createRedisHistory, shadowKey, usageKey } from '../src/gateway/history/redis-history.js'
import { DecisionTally } from '../src/gateway/history/tally.js'
import { decide } from '../src/gateway/limiter/decide.js'
import type { RateLimitDecision } from '../src/gateway/limiter/decision.js'
import type { ConsumeResult } from '../src/gateway/limiter/store.js'
import { median } from './lib/load.js'
import { REPO_ROOT, startRedis, stopAll } from './lib/processes.js'

export const DEFAULT_ROUNDS = 15
export const DEFAULT_BATCH = 200_000
const NOW = Date.UTC(2030, 0, 15, 12)

const intFromEnv = (name: string, fallback: number): number => {
  const raw = process.env[name]
  return raw === undefined || raw === '' ? fallback : Number.parseInt(raw, 10)
}

const PLAIN: Limits = { perMinute: 1_000, perDay: 100_000 }
const SHADOWED: Limits = { ...PLAIN, shadow: { perMinute: 10, perDay: undefined, announce: false } }
const RESULT: ConsumeResult = {
  outcome: 'ok', now: NOW, minute: { count: 500, resetAt: NOW + 60_000, retryAt: 0 }, day: { count: 5_000, resetAt: NOW + 86_400_000, retryAt: 0 }, bannedUntil: 0
}

/** A monthly quota admitting overage, its month already 1,000 units past the quota. */
const METERED: Limits = { ...PLAIN, perMonth: 1_000_000, overage: true }
const METERED_RESULT: ConsumeResult = { ...RESULT, month: { count: 1_001_000, resetAt: Date.UTC(2030, 1, 1), retryAt: 0 } }

function consumer (i: number, limits = SHADOWED): KeyRecord {
  return { id: `c-${i}`, consumerId: `c-${i}`, plan: 'free', limits, disabled: false, scopes: ['read', 'write'], expiresAt: undefined, expiresHeader: undefined }
}

/** CPU ns per call of `fn` over `count` calls. */
function nsPerCall (count: number, fn: (i: number) => void): number {
  const before = process.cpuUsage()
  for (let i = 0; i < count; i++) fn(i)
  const used = process.cpuUsage(before)
  return (used.user + used.system) * 1000 / count
}

async function timed (fn: () => Promise<void>): Promise<{ wallMs: number, cpuMs: number }> {
  const start = process.hrtime.bigint()
  const cpu = process.cpuUsage()
  await fn()
  const used = process.cpuUsage(cpu)
  return { wallMs: Math.round(Number(process.hrtime.bigint() - start) / 1e5) / 10, cpuMs: Math.round((used.user + used.system) / 100) / 10 }
}

async function main (): Promise<void> {
  const rounds = intFromEnv('BENCH_ROUNDS', DEFAULT_ROUNDS)
  const size = intFromEnv('BENCH_BATCH', DEFAULT_BATCH)
  let sink: RateLimitDecision | undefined
  const one = [consumer(0)]
  const many = Array.from({ length: 1_000 }, (_, i) => consumer(i))
  const shadowDecision = decide(RESULT, SHADOWED, 'free')
  const meteredDecision = decide(METERED_RESULT, METERED, 'free', 5)
  const metered = consumer(0, METERED)
  const tallies = { one: new DecisionTally(), many: new DecisionTally(), metered: new DecisionTally() }
  const subjects: Record<string, (i: number) => void> = {
    'decide(), no shadow': () => { sink = decide(RESULT, PLAIN, 'free') },
    'decide(), shadow (a shadow rejection)': () => { sink = decide(RESULT, SHADOWED, 'free') },
    'tally.note(), 1 consumer': () => { tallies.one.note(one[0]!, shadowDecision) },
    'tally.note(), 1,000 consumers': (i) => { tallies.many.note(many[i % 1_000]!, shadowDecision) },
    'tally.note(), 1 consumer, monthly quota, cost 5, overage': () => { tallies.metered.note(metered, meteredDecision) }
  }
  for (const fn of Object.values(subjects)) nsPerCall(size, fn)
  const perRound = new Map<string, number[]>(Object.keys(subjects).map((name) => [name, []]))
  for (let round = 0; round < rounds; round++) {
    const names = Object.keys(subjects)
    for (const name of round % 2 === 0 ? names : names.reverse()) perRound.get(name)?.push(nsPerCall(size, subjects[name]!))
    tallies.one.drain()
    tallies.many.drain()
    tallies.metered.drain()
  }
  if (sink === undefined) throw new Error('no decision')
  const plain = perRound.get('decide(), no shadow') ?? []
  const hotPath = [...perRound].map(([name, xs]) => ({
    name,
    nsPerCall: Math.round(median(xs) * 10) / 10,
    overPlainDecideNs: name.startsWith('decide') ? Math.round(median(xs.map((x, i) => x - (plain[i] ?? NaN))) * 10) / 10 : null
  }))

  const work = mkdtempSync(join(tmpdir(), 'petstore-history-'))
  try {
    const redis = await startRedis(work)
    const history = createRedisHistory(new Redis(redis.url))
    const tally = new DecisionTally()
    for (let d = 0; d < 31; d++) {
      // Counts in the millions: the hash's values at their widest.
      for (const allowed of [true, false]) tally.note(consumer(0), { ...shadowDecision, allowed, now: Date.UTC(2030, 0, 1 + d, 12) })
    }
    await history.write(tally.drain())
    await redis.cli('HINCRBY', usageKey('c-0', '203001'), '15a', '9876543')
    const usageMonthBytes = Number(await redis.cli('MEMORY', 'USAGE', usageKey('c-0', '203001'), 'SAMPLES', '0'))
    // The same month with every field a day can have (units beyond one a request, overage) and the month's units.
    for (let d = 0; d < 31; d++) {
      for (const allowed of [true, false]) tally.note(consumer(1, METERED), { ...meteredDecision, allowed, now: Date.UTC(2030, 0, 1 + d, 12) })
    }
    await history.write(tally.drain())
    await redis.cli('HINCRBY', usageKey('c-1', '203001'), '15x', '98765432')
    await redis.cli('HINCRBY', usageKey('c-1', '203001'), 'u', '987654321')
    const meteredMonthBytes = Number(await redis.cli('MEMORY', 'USAGE', usageKey('c-1', '203001'), 'SAMPLES', '0'))

    for (const c of many) tally.note(c, shadowDecision)
    const first = await timed(async () => { await history.write(tally.drain()) })
    // The next flush of the same consumers: their keys' expiries are already set.
    for (const c of many) tally.note(c, shadowDecision)
    const next = await timed(async () => { await history.write(tally.drain()) })
    const hour = hourOf(NOW)
    let shadowBytes = 0
    for (const part of ['n', 'a', 'f', 'l'] as const) shadowBytes += Number(await redis.cli('MEMORY', 'USAGE', shadowKey('free', hour, part), 'SAMPLES', '0'))
    await history.close()

    const report = {
      date: new Date().toISOString(),
      rounds,
      batch: size,
      hotPath,
      redis: {
        usageMonthHashBytes: usageMonthBytes,
        /** A month whose days all have units beyond one a request and overage, and the month's units (125 fields). */
        usageMonthHashBytesWithUnitsAndOverage: meteredMonthBytes,
        shadowHourBytesPerConsumer: Math.round(shadowBytes / many.length),
        /** One flush of 1,000 consumers' usage and shadow cells: wall ms and this process's CPU ms, the first and a later one. */
        flushOf1000Consumers: { first, next }
      }
    }
    mkdirSync(join(REPO_ROOT, 'bench', 'results'), { recursive: true })
    writeFileSync(join(REPO_ROOT, 'bench', 'results', 'history-cost.json'), `${JSON.stringify(report, null, 2)}\n`)
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`)
  } finally {
    await stopAll()
    rmSync(work, { recursive: true, force: true })
  }
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) await main()
