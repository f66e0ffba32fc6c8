// Long Redis outages (a minute, five minutes) with real processes and what they cost each consumer:
// the long tail of test/helpers/outage-tail.ts (two real gateway processes on one real redis-server,
// consumers far below their limits drawn by Zipf, shipped defaults but STORE_PROCESSES=2) plus a few
// consumers racing a small limit — at it when the outage begins — and every answer kept with its
// consumer, send and receive times. What it returns: per phase and group the share answered 2xx and
// the statuses (with each refusal's Retry-After), and per consumer the most admissions in any rolling
// minute, so a test holds the over-admission to the bound docs/limiter-internals.md states.
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createHash } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import { Pool } from 'undici'
import { mostInAnyMinute } from './attack.js'
import { FIXTURE_CONFIG_DIR, plansYaml } from './config-fixture.js'
import { seededZipf, type Phase } from './outage-tail.js'
import { sleep } from './poll.js'
import { freePort } from './ports.js'
import { REPO_ROOT, gatewayProcessEnv, runEntry, startGatewayProcess, waitForProcessHttp } from './processes.js'
import { reserveUnits, startRedis } from './redis.js'
import { parseScrape, sampleValue } from './scrape.js'

export type { Phase } from './outage-tail.js'

/** The gateway processes of every run, as STORE_PROCESSES tells them (the allowance is shared among them). */
export const PROCESSES = 2
/** STORE_OUTAGE_ALLOWANCE_PERCENT's default. */
export const ALLOWANCE_PERCENT = 10

/** The most over a limit the allowance permits, all processes together (docs/limiter-internals.md: A × STORE_PROCESSES). */
export function allowanceBound (perMinute: number): number {
  return Math.floor(ALLOWANCE_PERCENT / 100 * perMinute / PROCESSES) * PROCESSES
}

export interface LongOutageOptions {
  /** The tail: consumers drawn by Zipf (s = 1.1) at `rate` per second together, each `perMinute` (its day 100 ×). */
  readonly tail: { readonly consumers: number, readonly rate: number, readonly perMinute: number }
  /** Consumers sending `rate` per second each against a limit of `perMinute` (above it: racing it). */
  readonly racers: { readonly consumers: number, readonly rate: number, readonly perMinute: number }
  readonly phases: readonly Phase[]
  /** More environment for both gateways (e.g. STORE_ON_ERROR). */
  readonly env?: Record<string, string>
}

export type Group = 'tail' | 'racers'

export interface GroupPhase {
  requests: number, ok: number, statuses: Record<number, number>, retryAfter: Record<string, number>
  /** Milliseconds from send to answer of each request: a loaded machine's gateways fall behind, and a phase's answers then come later. */
  latencies: number[]
}

export interface ConsumerResult { readonly id: string, readonly group: Group, readonly perMinute: number, readonly admitted: number, readonly mostInAMinute: number }

/** A consumer of the tail refused during a phase: how many of its requests, from when, and its reserves in Redis as the phase began. */
export interface Refused { readonly id: string, readonly requests: number, readonly refused: number, readonly firstRefusedAfterMs: number, readonly reserveAtStart: number }

export interface LongOutageResult {
  /** Per phase, the tail consumers refused most (at most 10), busiest first. */
  readonly refusedMost: Record<string, Refused[]>
  readonly phases: Array<{ readonly name: string, readonly groups: Record<Group, GroupPhase> }>
  readonly consumers: ConsumerResult[]
  /** gateway_store_outage_admissions_total of both gateways together, by kind. */
  readonly outageAdmissions: { reserve: number, allowance: number }
}

const tailToken = (i: number): string => `psk_test_tail${String(i).padStart(5, '0')}_0123456789abcdefghij`
const racerToken = (i: number): string => `psk_test_race${String(i).padStart(5, '0')}_0123456789abcdefghij`

function keyLines (id: string, token: string, perMinute: number): string[] {
  return [`  - id: ${id}`, `    sha256: ${createHash('sha256').update(token).digest('hex')}`, '    plan: enterprise', `    limits: { perMinute: ${perMinute}, perDay: ${perMinute * 100} }`]
}

function configDir (opts: LongOutageOptions): string {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-outage-long-'))
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  writeFileSync(join(dir, 'plans.yaml'), plansYaml({ ban: { threshold: 1_000_000 } }))
  const lines = ['keys:']
  for (let i = 0; i < opts.tail.consumers; i++) lines.push(...keyLines(`tail${i}`, tailToken(i), opts.tail.perMinute))
  for (let i = 0; i < opts.racers.consumers; i++) lines.push(...keyLines(`race${i}`, racerToken(i), opts.racers.perMinute))
  writeFileSync(join(dir, 'keys.yaml'), lines.join('\n') + '\n')
  return dir
}

/** Sends `count()` requests at `rate` per second for `ms`, on a schedule (a late timer sends what it owes at once): counts, not timings. */
async function paced (rate: number, ms: number, send: () => void): Promise<void> {
  const total = Math.ceil(ms * rate / 1000)
  const start = performance.now()
  for (let due = 0; due < total;) {
    const owed = Math.min(Math.floor((performance.now() - start) * rate / 1000) + 1, total)
    while (due < owed) { send(); due++ }
    await sleep(Math.max(1, 1000 / rate))
  }
}

const emptyGroup = (): GroupPhase => ({ requests: 0, ok: 0, statuses: {}, retryAfter: {}, latencies: [] })

export async function longOutage (t: Pick<Test, 'teardown'>, opts: LongOutageOptions): Promise<LongOutageResult> {
  const redis = await startRedis(t)
  const backendDir = mkdtempSync(join(tmpdir(), 'petstore-outage-long-backend-'))
  t.teardown(() => { rmSync(backendDir, { recursive: true, force: true }) })
  const backendPort = await freePort()
  const backend = runEntry(t, 'src/backend/server.ts', { BACKEND_PORT: String(backendPort), PETS_DB: join(backendDir, 'pets.db'), LOG_LEVEL: 'warn' }, REPO_ROOT)
  const backendUrl = `http://127.0.0.1:${backendPort}`
  await waitForProcessHttp(backend, `${backendUrl}/v1/pets`)
  const dir = configDir(opts)
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  // One after the other: two gateways compiling at once on a loaded 2-core machine can miss the start timeout.
  const gateways: Array<{ pool: Pool, adminUrl: string }> = []
  for (let i = 0; i < PROCESSES; i++) {
    const { port, adminPort } = await startGatewayProcess(t, (port, adminPort) => gatewayProcessEnv({ port, adminPort, backendUrl, configDir: dir, redisUrl: redis.url },
      { LOG_LEVEL: 'warn', STORE_PROCESSES: String(PROCESSES), ...opts.env }))
    const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 64 })
    t.teardown(async () => { await pool.close() })
    gateways.push({ pool, adminUrl: `http://127.0.0.1:${adminPort}` })
  }

  const admissions = new Map<string, Array<{ send: number, recv: number }>>()
  const consumers: Array<{ id: string, group: Group, perMinute: number }> = []
  for (let i = 0; i < opts.tail.consumers; i++) consumers.push({ id: `tail${i}`, group: 'tail', perMinute: opts.tail.perMinute })
  for (let i = 0; i < opts.racers.consumers; i++) consumers.push({ id: `race${i}`, group: 'racers', perMinute: opts.racers.perMinute })
  for (const c of consumers) admissions.set(c.id, [])

  const inFlight: Array<Promise<void>> = []
  let sent = 0
  let phaseStart = 0
  let byConsumer = new Map<string, { requests: number, refused: number, firstRefusedAfterMs: number }>()
  const send = (phase: GroupPhase, id: string, token: string): void => {
    const gateway = gateways[sent++ % PROCESSES]!
    phase.requests++
    const tally = byConsumer.get(id) ?? { requests: 0, refused: 0, firstRefusedAfterMs: Infinity }
    byConsumer.set(id, tally)
    tally.requests++
    const since = phaseStart
    inFlight.push((async () => {
      let status = 0
      let retryAfter: string | undefined
      const sendAt = performance.now()
      try {
        const res = await gateway.pool.request({ path: '/v1/pets?limit=1', method: 'GET', headers: { authorization: `Bearer ${token}` } })
        await res.body.dump()
        status = res.statusCode
        const header = res.headers['retry-after']
        retryAfter = Array.isArray(header) ? header[0] : header
      } catch { /* status 0: the request itself failed */ }
      phase.statuses[status] = (phase.statuses[status] ?? 0) + 1
      phase.latencies.push(performance.now() - sendAt)
      if (status >= 200 && status < 300) {
        phase.ok++
        admissions.get(id)!.push({ send: sendAt, recv: performance.now() })
      } else {
        tally.refused++
        tally.firstRefusedAfterMs = Math.min(tally.firstRefusedAfterMs, sendAt - since)
      }
      if (status >= 300 && retryAfter !== undefined) {
        const label = `${status}:${retryAfter}`
        phase.retryAfter[label] = (phase.retryAfter[label] ?? 0) + 1
      }
    })())
  }

  const pickTail = seededZipf(opts.tail.consumers)
  let racerTurn = 0
  const phases: LongOutageResult['phases'] = []
  const tallies: Array<{ name: string, byConsumer: typeof byConsumer, reserves: Map<string, number> }> = []
  for (const phase of opts.phases) {
    const groups: Record<Group, GroupPhase> = { tail: emptyGroup(), racers: emptyGroup() }
    phases.push({ name: phase.name, groups })
    // The busiest tail consumers' reserves (all processes') as the phase begins: what an outage can spend.
    const reserves = new Map<string, number>()
    if (phase.kind !== 'traffic') {
      const ranks = Array.from({ length: 20 }, (_, rank) => rank)
      const fields = await Promise.all(ranks.map(async (rank) => await redis.cli('HGET', `rl:{tail${rank}}`, 'r')))
      ranks.forEach((rank) => { reserves.set(`tail${rank}`, reserveUnits(fields[rank]!)) })
    }
    byConsumer = new Map()
    tallies.push({ name: phase.name, byConsumer, reserves })
    phaseStart = performance.now()
    let restarted: Promise<void> = Promise.resolve()
    if (phase.kind === 'freeze') redis.signal('SIGSTOP')
    if (phase.kind === 'kill') {
      redis.signal('SIGKILL')
      restarted = redis.stop().then(async () => { await sleep(phase.ms); await redis.start() })
    }
    await Promise.all([
      paced(opts.tail.rate, phase.ms, () => { const rank = pickTail(); send(groups.tail, `tail${rank}`, tailToken(rank)) }),
      opts.racers.consumers === 0
        ? Promise.resolve()
        : paced(opts.racers.rate * opts.racers.consumers, phase.ms, () => { const i = racerTurn++ % opts.racers.consumers; send(groups.racers, `race${i}`, racerToken(i)) })
    ])
    if (phase.kind === 'freeze') redis.signal('SIGCONT')
    await restarted
  }
  await Promise.all(inFlight)

  const outageAdmissions = { reserve: 0, allowance: 0 }
  for (const g of gateways) {
    const scrape = parseScrape(await (await fetch(`${g.adminUrl}/metrics`)).text())
    for (const kind of ['reserve', 'allowance'] as const) outageAdmissions[kind] += sampleValue(scrape, 'gateway_store_outage_admissions_total', { kind }) ?? 0
  }
  const refusedMost: Record<string, Refused[]> = {}
  for (const { name, byConsumer: tally, reserves } of tallies) {
    refusedMost[name] = [...tally.entries()].filter(([id, x]) => id.startsWith('tail') && x.refused > 0)
      .sort((a, b) => b[1].refused - a[1].refused).slice(0, 10)
      .map(([id, x]) => ({ id, ...x, reserveAtStart: reserves.get(id) ?? 0 }))
  }
  return {
    refusedMost,
    phases,
    consumers: consumers.map((c) => {
      const admitted = admissions.get(c.id)!
      return { ...c, admitted: admitted.length, mostInAMinute: mostInAnyMinute(admitted) }
    }),
    outageAdmissions
  }
}

/** The share of a phase's requests of a group answered 2xx (1 when it sent none). */
export function answeredShare (result: LongOutageResult, phase: string, group: Group): number {
  const p = result.phases.find((x) => x.name === phase)?.groups[group]
  if (p === undefined) throw new Error(`no phase ${phase}`)
  return p.requests === 0 ? 1 : p.ok / p.requests
}

/** The largest excess over its minute limit any consumer of `group` reached in a rolling minute (negative: it stayed below). */
export function worstOver (result: LongOutageResult, group: Group): ConsumerResult & { over: number } {
  const rows = result.consumers.filter((c) => c.group === group).map((c) => ({ ...c, over: c.mostInAMinute - c.perMinute }))
  return rows.reduce((worst, c) => c.over > worst.over ? c : worst)
}

/** One line per phase and group: requests, the share answered 2xx, the statuses and the refusals' Retry-After; then the worst over per group. */
export function describeLongOutage (result: LongOutageResult): string {
  const phases = result.phases.map((p) => `${p.name}: ` + (['tail', 'racers'] as const).map((g) => {
    const x = p.groups[g]
    const sorted = [...x.latencies].sort((a, b) => a - b)
    const at = (q: number): string => ((sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0) / 1000).toFixed(2)
    return `${g} ${x.requests} requests, ${(100 * x.ok / Math.max(1, x.requests)).toFixed(2)} % 2xx ${JSON.stringify(x.statuses)} (answered after p50 ${at(0.5)} s, p99 ${at(0.99)} s)` +
      (Object.keys(x.retryAfter).length > 0 ? ` Retry-After ${JSON.stringify(x.retryAfter)}` : '')
  }).join(', '))
  const worst = (['tail', 'racers'] as const).map((g) => { const w = worstOver(result, g); return `${g} worst ${w.id}: ${w.mostInAMinute} in a rolling minute of ${w.perMinute} (over ${w.over})` })
  const refused = Object.entries(result.refusedMost).filter(([, rows]) => rows.length > 0).map(([name, rows]) => `refused most (${name}): ` +
    rows.map((r) => `${r.id} ${r.refused}/${r.requests} from +${(r.firstRefusedAfterMs / 1000).toFixed(1)} s (reserves ${r.reserveAtStart})`).join(', '))
  return [...phases, ...worst, ...refused, `outage admissions ${JSON.stringify(result.outageAdmissions)}`].join('\n')
}

/** STORE_ON_ERROR of a measuring run: the shipped default unless OUTAGE_LONG_POLICY names another (strict, for the docs' table). */
export function policyUnderTest (): string {
  return process.env.OUTAGE_LONG_POLICY ?? 'local'
}

/**
 * What every long-outage test holds, under either policy: the tail answered in full after the outage
 * (and before it, under local; after a freeze, from the thaw on), no consumer of the tail over its limit in any rolling minute (they stay far below it), no
 * racer over its limit by more than the allowance of all processes, and every refusal during the outage
 * told when to come back. Under `local` the tail's share through the outage is at least `minShare`.
 */
export function assertLongOutage (t: Test, run: LongOutageResult, o: { outage: string, minShare: number, policy: string, thawed?: boolean }): void {
  t.comment(describeLongOutage(run))
  const share = (phase: string): number => answeredShare(run, phase, 'tail')
  if (o.policy === 'local') {
    // Under strict a Redis call past STORE_TIMEOUT_MS on a loaded machine refuses, fault or not: only local promises these.
    t.equal(share('before'), 1, 'the tail answered 2xx in full before the outage')
    t.ok(share(o.outage) >= o.minShare, `≥ ${100 * o.minShare} % of the tail answered 2xx through the outage (${(100 * share(o.outage)).toFixed(2)} %)`)
    t.ok(run.outageAdmissions.allowance > 0 && run.outageAdmissions.reserve > 0, `outage admissions of both kinds (${JSON.stringify(run.outageAdmissions)})`)
  } else {
    t.equal(run.outageAdmissions.allowance, 0, `no allowance admissions under ${o.policy}`)
  }
  t.equal(share('after recovery'), 1, 'the tail answered 2xx in full after recovery')
  // After a freeze Redis answers at once with its data: from the thaw on nothing is refused for the outage (a refusal
  // waits for the shard to answer again). After an empty restart the re-seed and the barrier come first (by design).
  if (o.thawed === true && o.policy === 'local') t.equal(share('recovering'), 1, `the tail answered 2xx in full from the thaw on (${JSON.stringify(run.phases.find((p) => p.name === 'recovering')?.groups.tail.statuses)})`)
  const tail = worstOver(run, 'tail')
  t.ok(tail.over <= 0, `no tail consumer over its limit in a rolling minute (busiest ${tail.id}: ${tail.mostInAMinute} of ${tail.perMinute})`)
  const racer = worstOver(run, 'racers')
  const bound = o.policy === 'local' ? allowanceBound(racer.perMinute) : 0
  t.ok(racer.over <= bound, `no racer over its limit by more than ${bound} in a rolling minute (worst ${racer.id}: ${racer.mostInAMinute} of ${racer.perMinute})`)
  if (o.policy === 'local') t.ok(racer.mostInAMinute >= racer.perMinute * 0.9, `the racers reached their limit (${racer.mostInAMinute} of ${racer.perMinute}): the bound was tested at it`)
  const outage = run.phases.find((p) => p.name === o.outage)!
  for (const group of ['tail', 'racers'] as const) {
    const refused = Object.entries(outage.groups[group].statuses).reduce((n, [status, count]) => n + (Number(status) >= 400 ? count : 0), 0)
    const told = Object.values(outage.groups[group].retryAfter).reduce((n, count) => n + count, 0)
    t.equal(told, refused, `every ${group} refusal during the outage carries Retry-After (${JSON.stringify(outage.groups[group].retryAfter)})`)
  }
}

/**
 * The long tail and the racers through one outage (`outage`: a freeze or a kill and its length), between 25 s
 * of traffic before it and 15 s after, under policyUnderTest(); held by assertLongOutage with `minShare`.
 */
export async function longTailThrough (t: Test, outage: Phase, minShare: number): Promise<void> {
  const policy = policyUnderTest()
  const run = await longOutage(t, {
    tail: { consumers: 2_000, rate: 150, perMinute: 3_000 },
    racers: { consumers: 4, rate: 3, perMinute: 60 },
    phases: [
      { kind: 'traffic', name: 'before', ms: 25_000 },
      outage,
      { kind: 'traffic', name: 'recovering', ms: 5_000 },
      { kind: 'traffic', name: 'after recovery', ms: 10_000 }
    ],
    env: { STORE_ON_ERROR: policy }
  })
  assertLongOutage(t, run, { outage: outage.name, minShare, policy, thawed: outage.kind === 'freeze' })
}
