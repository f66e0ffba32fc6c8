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
import { FIXTURE_CONFIG_DIR, plansYaml } from './config-fixture.js'
import { EVENT_TIMEOUT_MS, poll, sleep } from './poll.js'
import { gatewayProcessEnv, startGatewayProcess } from './processes.js'
import { startRedis, type RedisProcess } from './redis.js'

export const QUOTA_ID = 'metered'
const QUOTA_TOKEN = 'psk_test_quota_0123456789abcdefghijkl'

/** What the processes of a rig share: the consumers' limits and the store's policy. */
export interface QuotaRigOptions {
  /** Each consumer's limits in keys.yaml: `{ perMinute: …, perDay: …, perMonth: … }`; consumer 0 is QUOTA_ID. */
  limits: readonly string[]
  /** STORE_ON_ERROR of both gateways (default: the shipped default, `local`). */
  policy?: 'local' | 'strict'
  /** STORE_PROCESSES of both gateways (the outage allowance is shared among them); unset by default. */
  storeProcesses?: number
}

/** One flood of a rig's consumer. */
export interface QuotaFloodRun {
  consumer: number
  /** Units of earlier days this month, planted before the consumer's first request. */
  planted?: number
  /** Requests sent, in waves of `wave` every 100 ms, alternating gateways. */
  requests: number
  wave: number
  /** Redis frozen `ms` long, `at` ms after the flood starts. */
  pauses: ReadonlyArray<{ at: number, ms: number }>
}

export interface QuotaFloodOptions extends Omit<QuotaFloodRun, 'consumer'>, Omit<QuotaRigOptions, 'limits'> {
  /** The consumer's limits in keys.yaml: `{ perMinute: …, perDay: …, perMonth: … }`. */
  limits: string
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

/** The id of a rig's consumer `index`: the first is QUOTA_ID. */
export const quotaConsumerId = (index: number): string => index === 0 ? QUOTA_ID : `${QUOTA_ID}-${index}`
/** Its bearer token: QUOTA_TOKEN with its index in place of the digit after `quota_` (the same length). */
const quotaToken = (index: number): string => index === 0 ? QUOTA_TOKEN : QUOTA_TOKEN.replace('quota_0', `quota_${index}`)

function configDir (limits: readonly string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-quota-'))
  cpSync(FIXTURE_CONFIG_DIR, dir, { recursive: true })
  writeFileSync(join(dir, 'plans.yaml'), plansYaml())
  writeFileSync(join(dir, 'keys.yaml'), [
    'keys:',
    ...limits.map((consumerLimits, index) => `  - { id: ${quotaConsumerId(index)}, sha256: ${createHash('sha256').update(quotaToken(index)).digest('hex')}, plan: enterprise, limits: ${consumerLimits} }`),
    ''
  ].join('\n'))
  return dir
}

/** One consumer's flood on its own redis-server, backend and two gateway processes. */
export async function quotaFlood (t: Pick<Test, 'teardown'>, opts: QuotaFloodOptions): Promise<QuotaFloodResult> {
  const rig = await startQuotaRig(t, { ...opts, limits: [opts.limits] })
  return await rig.flood({ ...opts, consumer: 0 })
}

/**
 * One redis-server, one backend and two gateway processes for the consumers of `opts.limits`: `flood`
 * runs one consumer's flood. Floods that share a rig, one after the other, each on its own consumer,
 * meet what `quotaFlood` gives each on its own processes (a consumer's windows, month, pools, blocks and
 * reserves are its own), and the four processes start once.
 */
export async function startQuotaRig (t: Pick<Test, 'teardown'>, opts: QuotaRigOptions): Promise<{ flood: (run: QuotaFloodRun) => Promise<QuotaFloodResult> }> {
  const redis = await startRedis(t)
  const backend = await startBackend(t)
  const dir = configDir(opts.limits)
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const gateways = await Promise.all([0, 1].map(async () => {
    const { port } = await startGatewayProcess(t, (port, adminPort) => gatewayProcessEnv({ port, adminPort, backendUrl: backend.url, configDir: dir, redisUrl: redis.url }, { LOG_LEVEL: 'warn', ...(opts.policy === undefined ? {} : { STORE_ON_ERROR: opts.policy }), ...(opts.storeProcesses === undefined ? {} : { STORE_PROCESSES: String(opts.storeProcesses) }) }))
    const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 64 })
    t.teardown(async () => { await pool.close() })
    return pool
  }))
  return { flood: async (run) => await flood(redis, gateways, run) }
}

async function flood (redis: RedisProcess, gateways: readonly Pool[], opts: QuotaFloodRun): Promise<QuotaFloodResult> {
  const id = quotaConsumerId(opts.consumer)
  const token = quotaToken(opts.consumer)
  if (opts.planted !== undefined) {
    const [seconds] = (await redis.cli('TIME')).split('\n')
    const now = new Date(Number(seconds) * 1000)
    await redis.cli('HSET', `rl:{${id}}`, 'Q', String(now.getUTCFullYear() * 12 + now.getUTCMonth()), 'q', String(opts.planted))
  }
  const answers: Record<string, number> = {}
  let lastAdmitted = 0
  const sent: Array<Promise<void>> = []
  let turn = 0
  const send = (): void => {
    const pool = gateways[turn++ % 2]!
    sent.push((async () => {
      let label = 'failed'
      try {
        const res = await pool.request({ path: '/v1/pets?limit=1', method: 'GET', headers: { authorization: `Bearer ${token}` } })
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
  const readMonth = async (): Promise<number> => Number(await redis.cli('HGET', `rl:{${id}}`, 'q'))
  await poll(async () => Date.now() >= settled && await readMonth() === expected, EVENT_TIMEOUT_MS, 100)
  const monthInRedis = await readMonth()
  return { answers, admitted, paused, monthInRedis }
}
