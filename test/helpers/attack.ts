// Attack-style runs of the limiter through Redis faults (docs/limiter-internals.md): two real
// gateway processes (src/gateway/server.ts, the shipped defaults) on one real redis-server, one
// consumer at ATTACK_LIMIT per minute, a burst on every wall-clock second boundary (Redis's minute
// buckets) plus steady requests between them, faults on the real redis-server (SIGSTOP/SIGCONT,
// SIGKILL and a restart without persistence), every answer logged with its client-side send and
// receive time, and the most 200s in any rolling minute — a 200 counts only if both its send and
// its receive time fall in the minute. The attack-*.test.ts files run it; bench/outage.ts runs it
// per STORE_ON_ERROR policy and against another checkout for the before/after table.
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createHash } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Worker } from 'node:worker_threads'
import type { Test } from 'tap'
import { Pool } from 'undici'
import type { BanPolicy } from '../../src/gateway/config/types.js'
import type { StoreOnError } from '../../src/gateway/limiter/redis/outage.js'
import { FIXTURE_CONFIG_DIR, plansYaml } from './config-fixture.js'
import { sleep } from './poll.js'
import { freePort } from './ports.js'
import { TEST_LONG } from './long.js'
import { REPO_ROOT, gatewayProcessEnv, runEntry, startGatewayProcess, waitForProcessHttp } from './processes.js'
import { startRedis, type RedisProcess } from './redis.js'
import { parseScrape, sampleValue } from './scrape.js'

export const ATTACK_LIMIT = 600
export const ATTACK_ID = 'attack'
const ATTACK_TOKEN = 'psk_test_attack_0123456789abcdefghij'
/**
 * A ban policy that never bans: every request of the run reaches the store. Until 29 Nov its window was cut to one
 * second: the grant script then kept one event per refusing call, and a minute of the flood's refusals (thousands of
 * events, reread at every refusal) made each call cost Redis 1.9 ms (attack-pauses). The record is kept per bucket of
 * the window now (src/gateway/limiter/ban-record.ts: at most 60 events), so the plans' window stands.
 */
export const NEVER_BAN: Partial<BanPolicy> = { threshold: 1_000_000 }

export type Fault =
  | { readonly kind: 'pause', readonly at: number, readonly ms: number }
  | { readonly kind: 'restart', readonly at: number, readonly downMs: number }

export interface AttackOptions {
  /** Faults, `at` ms after the run's first second boundary. */
  faults: readonly Fault[]
  durationMs: number
  storeOnError?: StoreOnError
  /** The plans' ban policy (default: never bans). */
  ban?: Partial<BanPolicy>
  /** Requests at each second boundary, spread over the two gateways (default 150). */
  burst?: number
  /** Requests spread over each second besides the burst (default 150). */
  steady?: number
  /** Extra requests in the first burst, to fill a fresh window in the first second (default 650). */
  fill?: number
  /**
   * The sliding steady state without a minute of real time: Redis is seeded with this many
   * admissions in each of the 60 seconds before the run, so every second boundary frees that many
   * (the seeded admissions count in the rolling minutes as 200s at the end of their second).
   */
  history?: number
  /** The checkout whose gateway runs (default: this one). */
  root?: string
  /** More environment for both gateways. */
  env?: Record<string, string>
}

export interface Answer {
  readonly send: number
  readonly recv: number
  readonly status: number
  /** Retry-After in seconds (0: none); a ban's is its length, a full window's at most 61. */
  readonly retryAfter: number
}

export interface AttackResult {
  readonly answers: Answer[]
  /** Unix ms of the seeded admissions (none without `history`). */
  readonly seeded: number[]
  /** The most admitted answers (200s, and seeded admissions) in any rolling 60 s. */
  readonly most: number
  readonly statuses: Record<number, number>
  /** Each fault as it happened: its start (Unix ms) and how long Redis was really stopped or gone. */
  readonly faults: Array<{ kind: Fault['kind'], start: number, ms: number }>
  /** gateway_store_errors_total of each gateway over the run (on a shared rig, this run's share). */
  readonly storeErrors: number[]
  readonly redis: RedisProcess
  readonly adminUrls: string[]
}

/** A status the limiter let through: not its 429 or its 503 (STORE_ON_ERROR=closed), not a failed request (0). */
export const ADMITTED = (status: number): boolean => status !== 429 && status !== 503 && status !== 0

/** Unix ms with sub-ms precision. */
const clock = (): number => performance.timeOrigin + performance.now()

/** The most admissions in any rolling 60 s: each counts in [a, a + 60 s] if sent at or after a and received by a + 60 s. */
export function mostInAnyMinute (admitted: ReadonlyArray<{ send: number, recv: number }>): number {
  const sorted = [...admitted].sort((x, y) => x.send - y.send)
  let most = 0
  for (let i = 0; i < sorted.length; i++) {
    const end = sorted[i]!.send + 60_000
    let n = 0
    for (let j = i; j < sorted.length && sorted[j]!.send <= end; j++) if (sorted[j]!.recv <= end) n++
    most = Math.max(most, n)
  }
  return most
}

/**
 * Freezes `pid` (SIGSTOP/SIGCONT) at the given Unix ms for the given durations, from a worker
 * thread that only sleeps (Atomics.wait): the load this process generates cannot stretch a pause.
 * Resolves with each pause's start and real length.
 */
async function pauses (pid: number, plan: Array<{ start: number, ms: number }>): Promise<Array<{ start: number, ms: number }>> {
  const code = `
    const { workerData, parentPort } = require('node:worker_threads')
    const cell = new Int32Array(new SharedArrayBuffer(4))
    const now = () => performance.timeOrigin + performance.now()
    const sleepUntil = (t) => { while (now() < t) Atomics.wait(cell, 0, 0, Math.max(0, t - now())) }
    const done = []
    for (const p of workerData.plan) {
      sleepUntil(p.start)
      const start = now()
      process.kill(workerData.pid, 'SIGSTOP')
      sleepUntil(start + p.ms)
      process.kill(workerData.pid, 'SIGCONT')
      done.push({ start, ms: now() - start })
    }
    parentPort.postMessage(done)`
  const worker = new Worker(code, { eval: true, workerData: { pid, plan } })
  return await new Promise((resolve, reject) => {
    worker.once('message', resolve)
    worker.once('error', reject)
  })
}

async function startBackendProcess (t: Pick<Test, 'teardown'>, root: string): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-attack-backend-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const port = await freePort()
  const backend = runEntry(t, 'src/backend/server.ts', { BACKEND_PORT: String(port), PETS_DB: join(dir, 'pets.db'), LOG_LEVEL: 'warn' }, root)
  const url = `http://127.0.0.1:${port}`
  await waitForProcessHttp(backend, `${url}/v1/pets`)
  return url
}

/** The id of the rig's consumer `index`: the first is ATTACK_ID, what the single-scenario tests read in Redis. */
export const attackConsumerId = (index: number): string => index === 0 ? ATTACK_ID : `${ATTACK_ID}-${index}`
/** Its bearer token: ATTACK_TOKEN with its index in place of the digit after `attack_` (the same length). */
const attackToken = (index: number): string => index === 0 ? ATTACK_TOKEN : ATTACK_TOKEN.replace('attack_0', `attack_${index}`)

function configDir (ban: Partial<BanPolicy>, consumers: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-attack-'))
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  writeFileSync(join(dir, 'plans.yaml'), plansYaml({ ban }))
  writeFileSync(join(dir, 'keys.yaml'), [
    'keys:',
    ...Array.from({ length: consumers }, (_, index) => [
      `  - id: ${attackConsumerId(index)}`,
      `    sha256: ${createHash('sha256').update(attackToken(index)).digest('hex')}`,
      '    plan: enterprise',
      `    limits: { perMinute: ${ATTACK_LIMIT}, perDay: 1000000 }`
    ]).flat(),
    ''
  ].join('\n'))
  return dir
}

/**
 * Writes `perSecond` admissions into each of the 60 minute buckets before `bucket`, as
 * limiter/lua/grant.lua keeps them (a bucket's field is its tag × 2^32 + units; the day's units in `c`).
 */
async function seedHistory (redis: RedisProcess, consumerId: string, bucket: number, perSecond: number): Promise<number[]> {
  const fields: string[] = []
  const times: number[] = []
  for (let j = bucket - 60; j < bucket; j++) {
    fields.push(String(j % 61), String((j % 2 ** 20) * 2 ** 32 + perSecond))
    for (let k = 0; k < perSecond; k++) times.push((j + 1) * 1000 - 1)
  }
  const total = String(60 * perSecond)
  const day = String(Math.floor((bucket - 1) * 1000 / 900_000))
  await redis.cli('HSET', `rl:{${consumerId}}`, ...fields, 't', String(bucket - 1), 'n', total, 'o', String(bucket - 60), 'D', day, 'N', total, 'O', day, 'c', total)
  await redis.cli('PEXPIRE', `rl:{${consumerId}}`, '86400000')
  return times
}

/** What the processes of a rig share: the options of AttackOptions that are not one run's. */
export type RigOptions = Pick<AttackOptions, 'storeOnError' | 'ban' | 'root' | 'env'>

/**
 * One redis-server, one backend and two gateway processes for `consumers` consumers (each at
 * ATTACK_LIMIT a minute): `run` attacks one of them. Runs that share a rig, one after the other, each
 * on its own consumer, meet what `attack` gives each on its own processes — the windows, pools,
 * blocks and reserves are per consumer — but pay the four processes' start once.
 */
export interface AttackRig {
  readonly redis: RedisProcess
  readonly adminUrls: string[]
  run: (opts: AttackOptions, consumer: number) => Promise<AttackResult>
}

async function storeErrorsOf (adminUrls: readonly string[]): Promise<number[]> {
  return await Promise.all(adminUrls.map(async (adminUrl) => {
    const scrape = parseScrape(await (await fetch(`${adminUrl}/metrics`)).text())
    return sampleValue(scrape, 'gateway_store_errors_total') ?? 0
  }))
}

export async function startAttackRig (t: Pick<Test, 'teardown'>, opts: RigOptions, consumers = 1): Promise<AttackRig> {
  const root = opts.root ?? REPO_ROOT
  const redis = await startRedis(t)
  const backendUrl = await startBackendProcess(t, root)
  const dir = configDir(opts.ban ?? NEVER_BAN, consumers)
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const gateways = await Promise.all([0, 1].map(async () => {
    const { port, adminPort } = await startGatewayProcess(t, (port, adminPort) => gatewayProcessEnv({ port, adminPort, backendUrl, configDir: dir, redisUrl: redis.url },
      { STORE_ON_ERROR: opts.storeOnError ?? 'local', LOG_LEVEL: 'warn', ...opts.env }), root)
    const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 128 })
    t.teardown(async () => { await pool.close() })
    return { pool, adminUrl: `http://127.0.0.1:${adminPort}` }
  }))
  const adminUrls = gateways.map((g) => g.adminUrl)
  const run = async (runOpts: AttackOptions, consumer: number): Promise<AttackResult> => {
    if (consumer < 0 || consumer >= consumers) throw new Error(`consumer ${consumer}: the rig has ${consumers}`)
    const errorsBefore = await storeErrorsOf(adminUrls)
    const result = await attackOnce(redis, gateways.map((g) => g.pool), runOpts, consumer)
    const errorsAfter = await storeErrorsOf(adminUrls)
    return { ...result, storeErrors: errorsAfter.map((n, i) => n - errorsBefore[i]!), redis, adminUrls }
  }
  return { redis, adminUrls, run }
}

/** One scenario on its own redis-server, backend and two gateway processes. */
export async function attack (t: Pick<Test, 'teardown'>, opts: AttackOptions): Promise<AttackResult> {
  const rig = await startAttackRig(t, opts)
  return await rig.run(opts, 0)
}

async function attackOnce (redis: RedisProcess, pools: readonly Pool[], opts: AttackOptions, consumer: number): Promise<Omit<AttackResult, 'storeErrors' | 'redis' | 'adminUrls'>> {
  const burstSize = opts.burst ?? 150
  const steady = opts.steady ?? 150
  const token = attackToken(consumer)
  const first = Math.ceil(clock() / 1000) * 1000 + 1_000
  const seeded = opts.history === undefined ? [] : await seedHistory(redis, attackConsumerId(consumer), first / 1000, opts.history)
  const answers: Answer[] = []
  const inFlight: Array<Promise<void>> = []
  let turn = 0
  const send = (): void => {
    const pool = pools[turn++ % 2]!
    const sent = clock()
    inFlight.push((async () => {
      let status = 0
      let retryAfter = 0
      try {
        const res = await pool.request({ path: '/v1/pets?limit=1', method: 'GET', headers: { authorization: `Bearer ${token}` } })
        await res.body.dump()
        status = res.statusCode
        retryAfter = Number(res.headers['retry-after'] ?? 0)
      } catch { /* status 0: the request itself failed */ }
      answers.push({ send: sent, recv: clock(), status, retryAfter })
    })())
  }
  const at = (ms: number, fn: () => void): void => { setTimeout(fn, Math.max(0, first + ms - clock())) }
  for (let s = 0; s * 1000 < opts.durationMs; s++) {
    at(s * 1000, () => {
      const n = burstSize + (s === 0 ? opts.fill ?? (opts.history === undefined ? 650 : 0) : 0)
      for (let i = 0; i < n; i++) send()
    })
    for (let k = 0; k < steady; k++) at(s * 1000 + (k + 0.5) * 1000 / steady, send)
  }
  const faults: AttackResult['faults'] = []
  const paused = pauses(redis.pid(), opts.faults.flatMap((f) => f.kind === 'pause' ? [{ start: first + f.at, ms: f.ms }] : []))
    .then((done) => { faults.push(...done.map((p) => ({ kind: 'pause' as const, ...p }))) })
  const restarted = opts.faults.map(async (fault) => {
    if (fault.kind !== 'restart') return
    await sleep(Math.max(0, first + fault.at - clock()))
    const start = clock()
    redis.signal('SIGKILL')
    await redis.stop()
    await sleep(Math.max(0, start + fault.downMs - clock()))
    await redis.start()
    faults.push({ kind: fault.kind, start, ms: clock() - start })
  })
  await sleep(first + opts.durationMs - clock())
  await Promise.all([paused, ...restarted])
  await Promise.all(inFlight)

  // An admitted request the backend then failed (502/504) is an admission all the same.
  const admitted = [...answers.filter((a) => ADMITTED(a.status)), ...seeded.map((time) => ({ send: time, recv: time }))]
  const statuses: Record<number, number> = {}
  for (const a of answers) statuses[a.status] = (statuses[a.status] ?? 0) + 1
  return { answers, seeded, most: mostInAnyMinute(admitted), statuses, faults }
}

/** Just before a boundary, just after one, mid-second: the first three are `npm test`'s round (FIRST_ROUND_MS); TEST_LONG adds two more before a boundary and one more mid-second. */
const PAUSES_AT = [2_980, 6_003, 9_500, 12_990, 16_500, 19_985]
const pausesOf = (ms: number): Fault[] => PAUSES_AT.map((at) => ({ kind: 'pause', at, ms }))

/** The scenarios the attack tests and bench/outage.ts run: the first four after a window filled in the first second. */
export const SCENARIOS = {
  'no fault': { faults: [], durationMs: 20_000 },
  /** Some pauses start just before a second boundary: its burst meets a frozen Redis. */
  '70 ms pauses': { faults: pausesOf(70), durationMs: 22_000 },
  '150 ms pauses': { faults: pausesOf(150), durationMs: 22_000 },
  /** Longer than STORE_TIMEOUT_MS (250 ms): the shard goes down, the reserves answer, the late replies still count. */
  '300 ms pauses': { faults: pausesOf(300), durationMs: 22_000 },
  '800 ms pauses': { faults: pausesOf(800), durationMs: 22_000 },
  /** Restarted empty (no persistence): for a second just before a boundary, then for 400 ms. */
  'kill and restart': { faults: [{ kind: 'restart', at: 3_990, downMs: 1_000 }, { kind: 'restart', at: 11_500, downMs: 400 }], durationMs: 20_000 },
  /**
   * The default ban policy. About 400 admitted, then Redis frozen for 3 s while the flood goes on:
   * each process answers from its pool and its reserve, the rest 503; once Redis is back the flood
   * fills the window in Redis and earns a ban there.
   */
  'ban then recover': { faults: [{ kind: 'pause', at: 400, ms: 3_000 }], durationMs: 12_000, ban: {}, fill: 250 },
  /**
   * The sliding steady state: 10 admissions seeded in each of the last 60 seconds, so every
   * boundary frees 10 that the burst races for; 150 ms pauses just before and just after boundaries.
   */
  'sliding window, 150 ms pauses at boundaries': {
    history: 10,
    faults: [2_995, 5_003, 7_990, 10_005, 12_998, 15_010, 17_995].map((at): Fault => ({ kind: 'pause', at, ms: 150 })),
    durationMs: 20_000
  }
} satisfies Record<string, AttackOptions>

/**
 * `npm test` runs each scenario's first round, `npm run test:long` (TEST_LONG=1) the whole of it:
 * the faults before this many ms after the first boundary, and the run ends there. Each first round
 * keeps one fault of every kind the scenario has (a pause or restart just before a boundary, one
 * mid-second, one just after), so the suite still meets each; the later rounds repeat them.
 */
const FIRST_ROUND_MS: Record<keyof typeof SCENARIOS, number> = {
  'no fault': 8_000,
  '70 ms pauses': 10_500,
  '150 ms pauses': 10_500,
  '300 ms pauses': 10_500,
  '800 ms pauses': 10_500,
  'kill and restart': 16_000,
  'ban then recover': 12_000,
  'sliding window, 150 ms pauses at boundaries': 11_000
}

/** The scenario an attack test runs: its first round in `npm test`, all of it with TEST_LONG=1. */
export function suiteScenario (name: keyof typeof SCENARIOS): AttackOptions {
  const scenario: AttackOptions = SCENARIOS[name]
  if (TEST_LONG) return scenario
  const untilMs = Math.min(FIRST_ROUND_MS[name], scenario.durationMs)
  return { ...scenario, faults: scenario.faults.filter((f) => f.at < untilMs), durationMs: untilMs }
}

/** What every attack test asserts first: each fault happened, and never more than the limit in a rolling minute (with the run described in a comment). */
export function assertWithinLimit (t: Test, run: AttackResult, scenario: AttackOptions): void {
  t.comment(describeRun(run))
  t.equal(run.faults.length, scenario.faults.length, 'every fault happened')
  t.ok(run.most <= ATTACK_LIMIT, `most admissions in a rolling minute: ${run.most} (limit ${ATTACK_LIMIT})`)
}

/** One line for a test's comment or a bench table: what the run did and the most 200s in a minute. */
export function describeRun (result: AttackResult): string {
  const faults = result.faults.map((f) => `${f.kind} ${f.ms.toFixed(0)} ms`).join(', ')
  return `most admitted in a rolling minute ${result.most} (limit ${ATTACK_LIMIT}${result.seeded.length > 0 ? `, ${result.seeded.length} seeded` : ''}); ` +
    `answers ${JSON.stringify(result.statuses)}; faults: ${faults === '' ? 'none' : faults}; store errors per gateway ${result.storeErrors.join(' / ')}`
}
