// The long tail through real Redis outages (docs/limiter-internals.md, STORE_ON_ERROR): two real
// gateway processes (src/gateway/server.ts, shipped defaults but STORE_PROCESSES=2, the deployment's
// count) on one real redis-server, `consumers` keys on a plan far above their traffic, requests drawn
// by Zipf (s = 1.1) at `rate` per second, and a sequence of phases — traffic only, Redis frozen
// (SIGSTOP), Redis killed and restarted empty after a while. Every answer is kept with the phase it
// was sent in; the real-process outage test and bench/outage.ts read the shares answered 2xx.
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createHash } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import { Pool } from 'undici'
import { FIXTURE_CONFIG_DIR, plansYaml } from './config-fixture.js'
import { sleep } from './poll.js'
import { freePort } from './ports.js'
import { REPO_ROOT, gatewayProcessEnv, runEntry, startGatewayProcess, waitForProcessHttp } from './processes.js'
import { startRedis } from './redis.js'
import { zipfPicker } from './sim/outage-schedules.js'
import { parseScrape, sampleValue } from './scrape.js'

export type Phase =
  | { readonly kind: 'traffic', readonly name: string, readonly ms: number }
  | { readonly kind: 'freeze', readonly name: string, readonly ms: number }
  | { readonly kind: 'kill', readonly name: string, readonly ms: number }

export interface OutageTailOptions {
  readonly consumers: number
  /** Requests per second, all consumers together. */
  readonly rate: number
  /** Each consumer's minute limit (its day: 100 ×). */
  readonly perMinute: number
  readonly phases: readonly Phase[]
  /** More environment for both gateways. */
  readonly env?: Record<string, string>
  readonly root?: string
}

/** One request not answered 2xx: the consumer's Zipf rank (0: the busiest), the gateway (0 or 1), when it was sent (ms after its phase began) and answered, and what it was told. */
export interface Refusal { readonly rank: number, readonly gateway: number, readonly sentMs: number, readonly answeredMs: number, readonly status: number, readonly code: string, readonly message: string }

export interface PhaseResult { readonly name: string, readonly requests: number, readonly ok: number, readonly statuses: Record<number, number>, readonly refusals: Refusal[], readonly startedAt: number }

export interface OutageTailResult {
  readonly phases: PhaseResult[]
  /** gateway_store_outage_admissions_total of both gateways together, by kind. */
  readonly outageAdmissions: { reserve: number, allowance: number }
  /** What each gateway wrote (pino lines at LOG_LEVEL, warn unless env sets it). */
  readonly logs: string[]
}

const token = (i: number): string => `psk_test_tail${String(i).padStart(5, '0')}_0123456789abcdefghij`

function configDir (consumers: number, perMinute: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-outage-tail-'))
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  writeFileSync(join(dir, 'plans.yaml'), plansYaml({ ban: { threshold: 1_000_000 } }))
  const lines = ['keys:']
  for (let i = 0; i < consumers; i++) {
    lines.push(`  - id: tail${i}`, `    sha256: ${createHash('sha256').update(token(i)).digest('hex')}`, '    plan: enterprise', `    limits: { perMinute: ${perMinute}, perDay: ${perMinute * 100} }`)
  }
  writeFileSync(join(dir, 'keys.yaml'), lines.join('\n') + '\n')
  return dir
}

/** Consumer ranks drawn by Zipf (s = 1.1) from a fixed seed, so every run sends the same traffic. */
export function seededZipf (n: number): () => number {
  const pick = zipfPicker(n)
  let seed = 38
  const random = (): number => { seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31; return seed / 2 ** 31 }
  return () => pick(random())
}

export async function outageTail (t: Pick<Test, 'teardown'>, opts: OutageTailOptions): Promise<OutageTailResult> {
  const root = opts.root ?? REPO_ROOT
  const redis = await startRedis(t)
  const backendDir = mkdtempSync(join(tmpdir(), 'petstore-outage-backend-'))
  t.teardown(() => { rmSync(backendDir, { recursive: true, force: true }) })
  const backendPort = await freePort()
  const backend = runEntry(t, 'src/backend/server.ts', { BACKEND_PORT: String(backendPort), PETS_DB: join(backendDir, 'pets.db'), LOG_LEVEL: 'warn' }, root)
  const backendUrl = `http://127.0.0.1:${backendPort}`
  await waitForProcessHttp(backend, `${backendUrl}/v1/pets`)
  const dir = configDir(opts.consumers, opts.perMinute)
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  // One after the other: two gateways compiling at once on a loaded 2-core machine can miss the start timeout.
  const gateways: Array<{ pool: Pool, adminUrl: string, output: () => string }> = []
  for (let i = 0; i < 2; i++) gateways.push(await (async () => {
    const { port, adminPort, proc } = await startGatewayProcess(t, (port, adminPort) => gatewayProcessEnv({ port, adminPort, backendUrl, configDir: dir, redisUrl: redis.url },
      { LOG_LEVEL: 'warn', STORE_PROCESSES: '2', ...opts.env }), root)
    const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 64 })
    t.teardown(async () => { await pool.close() })
    return { pool, adminUrl: `http://127.0.0.1:${adminPort}`, output: proc.output }
  })())

  const pick = seededZipf(opts.consumers)
  const results: Array<{ name: string, requests: number, ok: number, statuses: Record<number, number>, refusals: Refusal[], startedAt: number }> = []
  const inFlight: Array<Promise<void>> = []
  let sent = 0
  const send = (phase: { statuses: Record<number, number>, refusals: Refusal[] }, phaseStart: number): void => {
    const index = sent++ % 2
    const gateway = gateways[index]!
    const rank = pick()
    const key = token(rank)
    const sentMs = performance.now() - phaseStart
    inFlight.push((async () => {
      let status = 0
      let code = ''
      let message = ''
      try {
        const res = await gateway.pool.request({ path: '/v1/pets?limit=1', method: 'GET', headers: { authorization: `Bearer ${key}` } })
        status = res.statusCode
        if (status >= 200 && status < 300) await res.body.dump()
        else {
          const body = await res.body.text()
          try { ({ code = '', message = '' } = JSON.parse(body) as { code?: string, message?: string }) } catch { message = body.slice(0, 200) }
        }
      } catch (err) { message = (err as Error).message /* status 0: the request itself failed */ }
      phase.statuses[status] = (phase.statuses[status] ?? 0) + 1
      if (status < 200 || status >= 300) phase.refusals.push({ rank, gateway: index, sentMs: Math.round(sentMs), answeredMs: Math.round(performance.now() - phaseStart), status, code, message })
    })())
  }
  for (const phase of opts.phases) {
    const result = { name: phase.name, requests: 0, ok: 0, statuses: {} as Record<number, number>, refusals: [] as Refusal[], startedAt: Date.now() }
    results.push(result)
    let restarted: Promise<void> = Promise.resolve()
    if (phase.kind === 'freeze') redis.signal('SIGSTOP')
    if (phase.kind === 'kill') {
      redis.signal('SIGKILL')
      restarted = redis.stop().then(async () => { await sleep(phase.ms); await redis.start() })
    }
    // Requests at `rate` per second, on a schedule (a late timer sends what it owes at once): counts, not timings.
    const start = performance.now()
    for (let due = 0; due < phase.ms * opts.rate / 1000;) {
      const owed = Math.min(Math.floor((performance.now() - start) * opts.rate / 1000) + 1, Math.ceil(phase.ms * opts.rate / 1000))
      while (due < owed) { send(result, start); due++; result.requests++ }
      await sleep(1000 / opts.rate)
    }
    if (phase.kind === 'freeze') redis.signal('SIGCONT')
    await restarted
  }
  await Promise.all(inFlight)
  for (const r of results) r.ok = Object.entries(r.statuses).reduce((n, [status, count]) => n + (Number(status) >= 200 && Number(status) < 300 ? count : 0), 0)
  const outageAdmissions = { reserve: 0, allowance: 0 }
  for (const g of gateways) {
    const scrape = parseScrape(await (await fetch(`${g.adminUrl}/metrics`)).text())
    for (const kind of ['reserve', 'allowance'] as const) outageAdmissions[kind] += sampleValue(scrape, 'gateway_store_outage_admissions_total', { kind }) ?? 0
  }
  return { phases: results, outageAdmissions, logs: gateways.map((g) => g.output()) }
}

/** One line per phase: requests, the share answered 2xx, the statuses. */
export function describePhases (result: OutageTailResult): string {
  return result.phases.map((p) => `${p.name}: ${p.requests} requests, ${(100 * p.ok / Math.max(1, p.requests)).toFixed(2)} % 2xx ${JSON.stringify(p.statuses)}`).join('; ') +
    `; outage admissions ${JSON.stringify(result.outageAdmissions)}`
}

/** The refusals of phase `name`, one line each (at most `max`): rank, gateway, when, status, code and message. */
export function describeRefusals (result: OutageTailResult, name: string, max = 20): string[] {
  const phase = result.phases.find((p) => p.name === name)
  if (phase === undefined) return []
  const lines = phase.refusals.slice(0, max).map((r) => `${name} +${r.sentMs} ms (answered +${r.answeredMs}): rank ${r.rank}, gateway ${r.gateway}, ${r.status} ${r.code} ${r.message}`)
  if (phase.refusals.length > max) lines.push(`${name}: ${phase.refusals.length - max} more refusals`)
  return lines
}
