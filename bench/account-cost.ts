// What the Redis path's per-account state costs per decision, alone: the account of a checkout
// (src/gateway/limiter/redis/account.ts and its parts) driven through the calls a decision makes on
// it — the grant path of grants.ts's consume, and for a request the pool cannot serve, the build and
// reply of its write call as calls.ts makes them (the reply answered at once, as a fixed model of
// Redis: every request admitted, a block for a busy id) — plus the once-a-second sweep of every
// account. No Redis, no ioredis, no promises: the figure bench/zipf-calls.ts reads is 15–40 µs per
// decision of which this is a few, and its run-to-run noise on a loaded machine (±3–15 µs) hides a
// µs here. Each checkout in a child pinned to one core, the Zipf draw (10,000 consumers, s = 1.1) at
// 2,500 decisions per simulated second; rounds interleaved (order reversed every other round).
// Two figures, each after 100,000 decisions of warm-up: `steady` (100,000 more on the same ids) and
// `first` (15,000 on ids the warm-up did not use: most of them an id's first, the code already warm).
// Works with the account as parts (methods, this code) and as one object with functions (c5ab247).
//   BENCH_BASELINE=/checkout[,/other] node --import ./src/ts-resolve.ts bench/account-cost.ts   ACCOUNT_COST_ROUNDS (7)
import { execFile } from 'node:child_process'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'
import { median } from './lib/load.js'
import { taskset } from './lib/proc-cpu.js'
import { sourceLoaderArgs } from './lib/source-loader.js'
import { DEFAULT_ZIPF_CONSUMERS, DEFAULT_ZIPF_EXPONENT, DEFAULT_ZIPF_SEED, DEFAULT_ZIPF_SEQUENCE_LENGTH, zipfSequence } from './lib/zipf.js'

const run = promisify(execFile)
const HERE = resolve(import.meta.dirname, '..')
export const DEFAULT_ACCOUNT_COST_ROUNDS = 7
/** Simulated decisions per second (bench/zipf-calls.ts's unpaced runs come to about this many per second of Redis time). */
const DECISIONS_PER_SECOND = 2_500
const REDIS_OFFSET_MS = 5_000
const LIMITS = { perMinute: 1_000_000_000, perDay: 1_000_000_000_000 }
const TERMS = { limits: LIMITS, ban: null, monthLimit: 0, overage: true }
/** calls.ts's constants. */
const HOT_RATE = 2
const RESERVE_SECONDS = 60
const RESERVE_SLACK_SECONDS = 10
const IDLE_MS = 2_000

interface Window { used: number, resetAt: number, retryAt: number }
interface Reply { outcome: 'ok', admitted: number, bannedAt: number, extra: number, reserve: number, held: number, minute: Window, day: Window, month: Window, bannedUntil: number, pooled: number }
interface Clock { learn: (redisNow: number, sent: number, received: number) => void, latest: (localNow: number) => number | undefined, earliest: (localNow: number) => number | undefined }
/** One decision, and the sweep, on one checkout's account. */
interface Driver { decide: (id: string, localNow: number) => void, sweep: (localNow: number) => void }

/** Redis's model: every request asked for is admitted, the block asked for granted, the reserve asked for kept. */
function replyTo (requests: number, extra: number, reserve: number, redisNow: number, used: number): Reply {
  const window = { used, resetAt: redisNow + 60_000, retryAt: 0 }
  return { outcome: 'ok', admitted: requests, bannedAt: 0, extra, reserve, held: extra, minute: window, day: window, month: window, bannedUntil: 0, pooled: 0 }
}

/* eslint-disable @typescript-eslint/no-explicit-any -- two versions of an internal module, driven by their own shapes */
/** The account as parts (pool, reserve, allowance, ledger) with methods: this code and main since 3d90e91. */
function partsDriver (mod: any, clock: Clock): Driver {
  const table = new Map<string, any>()
  let counted = 0
  const noop = (): void => {}
  function reserveWant (account: any, localNow: number): number {
    if (localNow - account.lastSeen > IDLE_MS) return 0
    const perSecond = account.rate(Math.min(localNow, account.second * 1000 + 999))
    const room = mod.roomSeen(account)
    if (room < perSecond * RESERVE_SLACK_SECONDS) return 0
    const kept = Math.min(account.reserve.units, Math.floor(room / 4))
    if (perSecond < HOT_RATE || account.seenBefore === 0) return kept
    return Math.max(kept, Math.min(Math.ceil(perSecond * RESERVE_SECONDS), Math.floor(room / 4)))
  }
  function call (account: any, localNow: number): void {
    account.pool.expire(clock, localNow)
    for (let request = account.servedFromPool(clock, localNow); request !== undefined; request = account.servedFromPool(clock, localNow)) mod.consumeResult(account, 'ok', account.redisTimeAt(localNow), 'grant')
    const waiting = account.takeWaiting()
    const want = reserveWant(account, localNow)
    const sent = account.reserve.writeBacks()
    const sentAllowance = account.allowance.writeBacks()
    const adjustments = [...account.pool.takeGiveBacks(), ...sent, ...sentAllowance]
    if (waiting.length === 0 && adjustments.length === 0 && want >= account.reserve.units) { account.callEnded(); return }
    account.reserve.capInFlight(want)
    const perSecond = account.rate(localNow)
    const extra = waiting.length > 0 && perSecond >= HOT_RATE ? Math.ceil(perSecond) : 0
    mod.entryOf(account, waiting.length, 1, extra, want, adjustments)
    // The reply, at once.
    const redisNow = localNow + REDIS_OFFSET_MS
    counted += waiting.length + extra
    const reply = replyTo(waiting.length, extra, want, redisNow, counted % 1_000_000)
    account.callEnded()
    clock.learn(redisNow, localNow, localNow)
    account.heard(reply, redisNow, localNow)
    account.reserve.kept(reply.reserve, redisNow)
    account.reserve.settle(sent)
    account.allowance.settle(sentAllowance)
    account.fillPool(reply.admitted + reply.extra, reply.extra, redisNow)
    for (const request of waiting) if (account.spendPool(request.cost, clock, localNow)) mod.consumeResult(account, 'ok', redisNow, 'store')
    account.requeue([])
    account.pool.expire(clock, localNow)
  }
  return {
    decide (id, localNow) {
      let account = table.get(id)
      if (account === undefined) {
        account = new mod.Account(id, `rl:{${id}}`, 'shard')
        table.set(id, account)
      }
      account.configure(TERMS)
      account.countRequest(localNow)
      if (!account.pool.expire(clock, localNow) && account.waitingCount === 0 && account.spendPool(1, clock, localNow)) {
        mod.consumeResult(account, 'ok', account.redisTimeAt(localNow), 'grant')
        return
      }
      account.wait({ cost: 1, resolve: noop, reject: noop, attempts: 0, blockWaits: 0 })
      account.callStarted()
      call(account, localNow)
    },
    sweep (localNow) {
      for (const account of table.values()) {
        account.pool.expire(clock, localNow)
        const earliest = clock.earliest(localNow)
        if (earliest !== undefined) account.ledger.prune(earliest)
        const idle = localNow - account.lastSeen > IDLE_MS
        if (account.pool.owesGiveBack || account.reserve.owesWriteBack || account.allowance.owesWriteBack || (idle && account.reserve.units > 0)) {
          account.callStarted()
          call(account, localNow)
        }
      }
    }
  }
}

/** The account as one object and functions on it (c5ab247, before the parts). */
function functionsDriver (mod: any, clock: Clock): Driver {
  const table = new Map<string, any>()
  let counted = 0
  const noop = (): void => {}
  function reserveWant (account: any, localNow: number): number {
    if (localNow - account.lastSeen > IDLE_MS) return 0
    const perSecond = mod.rate(account, Math.min(localNow, account.second * 1000 + 999))
    const room = mod.roomSeen(account)
    if (room < perSecond * RESERVE_SLACK_SECONDS) return 0
    const kept = Math.min(account.reserve, Math.floor(room / 4))
    if (perSecond < HOT_RATE || account.seenBefore === 0) return kept
    return Math.max(kept, Math.min(Math.ceil(perSecond * RESERVE_SECONDS), Math.floor(room / 4)))
  }
  function call (account: any, localNow: number): void {
    mod.expirePool(account, clock, localNow)
    while (account.waiting.length > 0 && account.waiting[0].cost <= account.pool && mod.poolLive(account, clock, localNow)) {
      const request = account.waiting.shift()
      mod.spendPool(account, request.cost)
      mod.consumeResult(account, 'ok', account.viewAt + (localNow - account.viewLocal), 'grant')
    }
    const waiting = account.waiting.splice(0)
    const want = reserveWant(account, localNow)
    const sent = account.unwritten.slice()
    const sentAllowance = account.allowanceUnwritten.slice()
    const adjustments = [...account.returns, ...sent, ...sentAllowance]
    account.returns = []
    if (waiting.length === 0 && adjustments.length === 0 && want >= account.reserve) { account.calling = false; return }
    account.reserveCap = Math.min(account.reserve, mod.unwrittenUnits(account) + want)
    const perSecond = mod.rate(account, localNow)
    const extra = waiting.length > 0 && perSecond >= HOT_RATE ? Math.ceil(perSecond) : 0
    mod.entryOf(account, waiting.length, 1, extra, want, adjustments)
    const redisNow = localNow + REDIS_OFFSET_MS
    counted += waiting.length + extra
    const reply = replyTo(waiting.length, extra, want, redisNow, counted % 1_000_000)
    account.calling = false
    clock.learn(redisNow, localNow, localNow)
    Object.assign(account, { view: reply, viewAt: redisNow, viewLocal: localNow, reserve: reply.reserve, reserveUntil: redisNow + 70_000, reserveCap: undefined })
    account.unwritten = sent.reduce((list: unknown[], adjustment: any) => mod.addAdjustment(list, { ...adjustment, delta: -adjustment.delta }), account.unwritten)
    account.allowanceUnwritten = sentAllowance.reduce((list: unknown[], adjustment: any) => mod.addAdjustment(list, { ...adjustment, delta: -adjustment.delta }), account.allowanceUnwritten)
    mod.fillPool(account, reply.admitted + reply.extra, reply.extra, redisNow)
    const live = mod.poolLive(account, clock, localNow)
    for (const request of waiting) {
      if (live) {
        mod.spendPool(account, request.cost)
        mod.consumeResult(account, 'ok', redisNow, 'store')
      }
    }
    account.waiting.unshift(...[])
    mod.expirePool(account, clock, localNow)
  }
  return {
    decide (id, localNow) {
      let account = table.get(id)
      if (account === undefined) {
        account = new mod.Account(id, `rl:{${id}}`, 'shard')
        table.set(id, account)
      }
      account.limits = TERMS.limits
      account.ban = TERMS.ban
      account.monthLimit = TERMS.monthLimit
      account.monthSoft = TERMS.overage
      mod.countRequest(account, localNow)
      if (!mod.expirePool(account, clock, localNow) && account.waiting.length === 0 && account.pool >= 1) {
        mod.spendPool(account, 1)
        mod.consumeResult(account, 'ok', account.viewAt + (localNow - account.viewLocal), 'grant')
        return
      }
      account.waiting.push({ cost: 1, resolve: noop, reject: noop, attempts: 0, blockWaits: 0 })
      account.calling = true
      call(account, localNow)
    },
    sweep (localNow) {
      for (const account of table.values()) {
        mod.expirePool(account, clock, localNow)
        const earliest = clock.earliest(localNow)
        if (earliest !== undefined) mod.pruneLedger(account, earliest)
        const idle = localNow - account.lastSeen > IDLE_MS
        if (account.returns.length > 0 || account.unwritten.length > 0 || account.allowanceUnwritten.length > 0 || (idle && account.reserve > 0)) {
          account.calling = true
          call(account, localNow)
        }
      }
    }
  }
}
/* eslint-enable @typescript-eslint/no-explicit-any */

async function child (root: string, figure: string): Promise<void> {
  const mod = await import(join(root, 'src/gateway/limiter/redis/account.ts')) as Record<string, unknown>
  const { createShardClock } = await import(join(root, 'src/gateway/limiter/redis/clock.ts')) as { createShardClock: () => Clock }
  const clock = createShardClock()
  const start = 1_900_000_000_000
  clock.learn(start + REDIS_OFFSET_MS, start, start)
  const driver = typeof mod.expirePool === 'function' ? functionsDriver(mod, clock) : partsDriver(mod, clock)
  const order = zipfSequence({ consumers: DEFAULT_ZIPF_CONSUMERS, exponent: DEFAULT_ZIPF_EXPONENT, length: DEFAULT_ZIPF_SEQUENCE_LENGTH, seed: DEFAULT_ZIPF_SEED })
  let decision = 0
  const drive = (count: number, prefix: string): void => {
    for (let index = 0; index < count; index++, decision++) {
      const localNow = start + Math.floor(decision * 1000 / DECISIONS_PER_SECOND)
      if (decision % DECISIONS_PER_SECOND === 0 && decision > 0) driver.sweep(localNow)
      driver.decide(`${prefix}-${order[index % order.length]!}`, localNow)
    }
  }
  // `first`: the warm-up's ids are others, so the measured decisions meet accounts not seen yet with the code warm.
  drive(100_000, figure === 'first' ? 'warm' : 'key')
  const measured = figure === 'first' ? 15_000 : 100_000
  const before = process.cpuUsage()
  drive(measured, 'key')
  const used = process.cpuUsage(before)
  process.stdout.write(JSON.stringify({ root, figure, nsPerDecision: (used.user + used.system) * 1000 / measured }) + '\n')
}

async function main (): Promise<void> {
  const [mode, root, figure] = process.argv.slice(2)
  if (mode === '--child') return await child(root!, figure!)
  const rounds = Number(process.env.ACCOUNT_COST_ROUNDS ?? DEFAULT_ACCOUNT_COST_ROUNDS)
  const variants = [HERE, ...(process.env.BENCH_BASELINE ?? '').split(',').filter((dir) => dir.trim() !== '').map((dir) => resolve(dir.trim()))]
  const results = new Map<string, number[]>()
  const bin = taskset()
  for (let round = 0; round < rounds; round++) {
    for (const variant of round % 2 === 0 ? variants : [...variants].reverse()) {
      for (const figure of ['steady', 'first']) {
        const command = [process.execPath, ...sourceLoaderArgs(join(variant, 'src', 'gateway', 'server.ts')), join(HERE, 'bench/account-cost.ts'), '--child', variant, figure]
        const { stdout } = bin === null ? await run(command[0]!, command.slice(1), { cwd: HERE }) : await run(bin, ['-c', '1', ...command], { cwd: HERE })
        const { nsPerDecision } = JSON.parse(stdout.trim().split('\n').pop()!) as { nsPerDecision: number }
        results.set(`${variant} ${figure}`, [...(results.get(`${variant} ${figure}`) ?? []), nsPerDecision])
        process.stderr.write(`round ${round + 1} ${variant} ${figure}: ${nsPerDecision.toFixed(0)} ns per decision\n`)
      }
    }
  }
  console.log(`the account alone, CPU ns per decision (pinned, ${rounds} interleaved rounds): median (range); paired: this checkout − the other, median of rounds`)
  console.log('| checkout | steady | first 15,000 (new ids) | steady: this − it | first: this − it |')
  console.log('|---|---:|---:|---:|---:|')
  for (const variant of variants) {
    const cell = (xs: number[]): string => `${median(xs).toFixed(0)} (${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)})`
    const paired = (figure: string): string => {
      if (variant === HERE) return '–'
      const mine = results.get(`${HERE} ${figure}`)!
      const deltas = results.get(`${variant} ${figure}`)!.map((value, index) => mine[index]! - value)
      return `${median(deltas).toFixed(0)} (${deltas.filter((delta) => delta < 0).length} of ${deltas.length} lower)`
    }
    console.log(`| ${variant} | ${cell(results.get(`${variant} steady`)!)} | ${cell(results.get(`${variant} first`)!)} | ${paired('steady')} | ${paired('first')} |`)
  }
}

await main()
