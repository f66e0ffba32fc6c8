// A monthly quota under attack, beside attack.ts (which floods a minute window): two real gateway
// processes (src/gateway/server.ts, the shipped defaults: STORE_ON_ERROR=local) on one real
// redis-server, one consumer with a month quota — optionally with earlier days' units planted in its
// hash as the grant script keeps them (`Q` the month, `q` its units) — a flood spread over both
// gateways, Redis frozen (SIGSTOP) while it runs, and every answer counted.
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createHash } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import { Pool } from 'undici'
import { startBackend } from './backend.js'
import { FIXTURE_CONFIG_DIR, plansYaml } from './gateway.js'
import { EVENT_TIMEOUT_MS, poll, sleep } from './poll.js'
import { gatewayProcessEnv, startGatewayProcess } from './processes.js'
import { startRedis } from './redis.js'

export const QUOTA_ID = 'metered'
const QUOTA_TOKEN = 'psk_test_quota_0123456789abcdefghijkl'

export interface QuotaFloodOptions {
  /** The consumer's limits in keys.yaml: `{ perMinute: …, perDay: …, perMonth: … }`. */
  limits: string
  /** Units of earlier days this month, planted before the gateways start. */
  planted?: number
  /** Requests sent, in waves of `wave` every 100 ms, alternating gateways. */
  requests: number
  wave: number
  /** Redis frozen `ms` long, `at` ms after the flood starts. */
  pauses: ReadonlyArray<{ at: number, ms: number }>
  /** STORE_ON_ERROR of both gateways (default: the shipped default, `local`). */
  policy?: 'local' | 'strict'
  /** STORE_PROCESSES of both gateways (the outage allowance is shared among them); unset by default. */
  storeProcesses?: number
}

export interface QuotaFloodResult {
  /** Answers by status and code: `200`, `429 quota_exceeded`, `503 unavailable`, … */
  readonly answers: Record<string, number>
  readonly admitted: number
  /** Each pause as it happened (ms). */
  readonly paused: number[]
  /** The month's units in Redis once every process has given back what it held unspent. */
  readonly monthInRedis: number
}

function configDir (limits: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-quota-'))
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  writeFileSync(join(dir, 'plans.yaml'), plansYaml())
  writeFileSync(join(dir, 'keys.yaml'), [
    'keys:',
    `  - { id: ${QUOTA_ID}, sha256: ${createHash('sha256').update(QUOTA_TOKEN).digest('hex')}, plan: enterprise, limits: ${limits} }`,
    ''
  ].join('\n'))
  return dir
}

export async function quotaFlood (t: Pick<Test, 'teardown'>, opts: QuotaFloodOptions): Promise<QuotaFloodResult> {
  const redis = await startRedis(t)
  if (opts.planted !== undefined) {
    const [seconds] = (await redis.cli('TIME')).split('\n')
    const now = new Date(Number(seconds) * 1000)
    await redis.cli('HSET', `rl:{${QUOTA_ID}}`, 'Q', String(now.getUTCFullYear() * 12 + now.getUTCMonth()), 'q', String(opts.planted))
  }
  const backend = await startBackend(t)
  const dir = configDir(opts.limits)
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const gateways = await Promise.all([0, 1].map(async () => {
    const { port } = await startGatewayProcess(t, (port, adminPort) => gatewayProcessEnv({ port, adminPort, backendUrl: backend.url, configDir: dir, redisUrl: redis.url }, { LOG_LEVEL: 'warn', ...(opts.policy === undefined ? {} : { STORE_ON_ERROR: opts.policy }), ...(opts.storeProcesses === undefined ? {} : { STORE_PROCESSES: String(opts.storeProcesses) }) }))
    const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 64 })
    t.teardown(async () => { await pool.close() })
    return pool
  }))

  const answers: Record<string, number> = {}
  let lastAdmitted = 0
  const sent: Array<Promise<void>> = []
  let turn = 0
  const send = (): void => {
    const pool = gateways[turn++ % 2]!
    sent.push((async () => {
      let label = 'failed'
      try {
        const res = await pool.request({ path: '/v1/pets?limit=1', method: 'GET', headers: { authorization: `Bearer ${QUOTA_TOKEN}` } })
        const text = await res.body.text()
        label = res.statusCode < 400 ? String(res.statusCode) : `${res.statusCode} ${(JSON.parse(text) as { code?: string }).code ?? '?'}`
        if (res.statusCode < 400) lastAdmitted = Date.now()
      } catch { /* counted as failed */ }
      answers[label] = (answers[label] ?? 0) + 1
    })())
  }
  const start = Date.now()
  const paused: number[] = []
  let thawed = 0
  const freezes = opts.pauses.map(async (p) => {
    await sleep(Math.max(0, start + p.at - Date.now()))
    const from = Date.now()
    redis.signal('SIGSTOP')
    await sleep(p.ms)
    redis.signal('SIGCONT')
    paused.push(Date.now() - from)
    thawed = Math.max(thawed, Date.now())
  })
  for (let sentSoFar = 0; sentSoFar < opts.requests; sentSoFar += opts.wave) {
    for (let i = 0; i < Math.min(opts.wave, opts.requests - sentSoFar); i++) send()
    await sleep(100)
  }
  await Promise.all(freezes)
  await Promise.all(sent)
  const admitted = Object.entries(answers).filter(([label]) => /^[23]\d\d$/.test(label)).reduce((sum, [, n]) => sum + n, 0)
  // Blocks held unspent are given back within a second or two of their bucket's end, and a block is
  // granted only by a call whose reply admits, or by a late reply once Redis is thawed: 3 s after the
  // later of the last admission and the last thaw, nothing is owed any more (the flood's tail is 429s
  // that take no block). Until then, and until the month in Redis is what was admitted, it is read
  // again; a month that never gets there is returned as it is after EVENT_TIMEOUT_MS, for the test to print.
  const expected = (opts.planted ?? 0) + admitted
  const settled = Math.max(lastAdmitted, thawed) + 3_000
  const readMonth = async (): Promise<number> => Number(await redis.cli('HGET', `rl:{${QUOTA_ID}}`, 'q'))
  await poll(async () => Date.now() >= settled && await readMonth() === expected, EVENT_TIMEOUT_MS, 100)
  const monthInRedis = await readMonth()
  return { answers, admitted, paused, monthInRedis }
}
