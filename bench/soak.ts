// Soak: a bounded run of mixed traffic through a real stack (redis-server, backend and gateway as
// child processes, on free ports) that samples the gateway's RSS (/proc/<pid>/status) and event-loop
// lag (its own /metrics) every 10 s, and fails if RSS grows more than 10 % after warm-up — the leak
// check a short test cannot make. Mix: valid, rate-limited (just over its limit, never banned),
// banned (hammered until banned), invalid keys, the deprecated route, a few POSTs.
// Run: npm run soak -- --minutes 10 [--rate 200] [--warmup 1]
import { spawn, type ChildProcess } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { Pool } from 'undici'
import { freePort, REPO_ROOT, sourceLoaderArgs } from './lib/processes.js'

const DEFAULT_MINUTES = 10
const DEFAULT_RATE = 200
const DEFAULT_WARMUP_MINUTES = 1
const SAMPLE_MS = 10_000
const TICK_MS = 50
const MAX_IN_FLIGHT = 256
const MAX_RSS_GROWTH = 0.10
const ROOT = join(import.meta.dirname, '..')

const { values } = parseArgs({ options: { minutes: { type: 'string' }, rate: { type: 'string' }, warmup: { type: 'string' } } })
const minutes = Number(values.minutes ?? DEFAULT_MINUTES)
const rate = Number(values.rate ?? DEFAULT_RATE)
const warmupMinutes = Math.min(Number(values.warmup ?? DEFAULT_WARMUP_MINUTES), minutes / 2)
if (!(minutes > 0) || !(rate > 0)) throw new Error('usage: soak --minutes N [--rate R] [--warmup M]')

const KEYS = {
  valid: `psk_soak_valid_${randomBytes(12).toString('hex')}`,
  limited: `psk_soak_limited_${randomBytes(12).toString('hex')}`,
  banned: `psk_soak_banned_${randomBytes(12).toString('hex')}`
}
const sha = (s: string): string => createHash('sha256').update(s).digest('hex')
/** Requests per second by kind; `limited` runs at ~1.15× its 120/min limit (about 18 429s a minute, under the ban threshold of 30). */
const MIX = [
  { kind: 'valid', share: 0.70 },
  { kind: 'deprecated', share: 0.10 },
  { kind: 'invalid', share: 0.08 },
  { kind: 'banned', share: 0.05 },
  { kind: 'post', share: 0.02 }
] as const
const LIMITED_PER_SECOND = 2.3

const children: ChildProcess[] = []
function start (name: string, command: string, args: string[], env: Record<string, string>): ChildProcess {
  const child = spawn(command, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] })
  let err = ''
  child.stderr?.on('data', (c: Buffer) => { err = (err + c.toString()).slice(-2000) })
  child.once('exit', (code, signal) => { if (!stopping) { console.error(`${name} exited (${code ?? signal}) during the soak:\n${err}`); process.exitCode = 1 } })
  children.push(child)
  return child
}

async function waitHttp (url: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try { await (await fetch(url)).arrayBuffer(); return } catch { await new Promise((resolve) => setTimeout(resolve, 100)) }
  }
  throw new Error(`${url} did not come up`)
}

function rssMiB (pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]
  return Number(kb) / 1024
}

async function lag (adminUrl: string): Promise<{ p99: number, max: number }> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text()
  const read = (name: string): number => Number(new RegExp(`^${name} ([0-9.e+-]+)`, 'm').exec(text)?.[1] ?? NaN) * 1000
  return { p99: read('nodejs_eventloop_lag_p99_seconds'), max: read('nodejs_eventloop_lag_max_seconds') }
}

let stopping = false
const dir = mkdtempSync(join(tmpdir(), 'petstore-soak-'))
async function main (): Promise<void> {
  const configDir = join(dir, 'config')
  mkdirSync(configDir)
  for (const file of ['plans.yaml', 'routes.yaml']) copyFileSync(join(ROOT, 'config', file), join(configDir, file))
  writeFileSync(join(configDir, 'keys.yaml'), 'keys:\n' +
    `  - { id: soak-valid, sha256: ${sha(KEYS.valid)}, plan: enterprise, limits: { perMinute: 1000000, perDay: 100000000 } }\n` +
    `  - { id: soak-limited, sha256: ${sha(KEYS.limited)}, plan: enterprise, limits: { perMinute: 120, perDay: 100000000 } }\n` +
    `  - { id: soak-banned, sha256: ${sha(KEYS.banned)}, plan: free }\n`)

  const redisPort = await freePort()
  start('redis-server', 'redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {})
  const backendPort = await freePort()
  start('backend', process.execPath, [...sourceLoaderArgs(join(REPO_ROOT, 'src/backend/server.ts')), 'src/backend/server.ts'], { BACKEND_PORT: String(backendPort), PETS_DB: join(dir, 'pets.db'), LOG_LEVEL: 'warn' })
  const port = await freePort()
  const adminPort = await freePort()
  const gateway = start('gateway', process.execPath, [...sourceLoaderArgs(join(REPO_ROOT, 'src/gateway/server.ts')), 'src/gateway/server.ts'], {
    GATEWAY_HOST: '127.0.0.1', GATEWAY_PORT: String(port), ADMIN_PORT: String(adminPort), CONFIG_DIR: configDir,
    BACKEND_URL: `http://127.0.0.1:${backendPort}`, REDIS_URL: `redis://127.0.0.1:${redisPort}`, LOG_LEVEL: 'warn', CONFIG_WATCH: 'false'
  })
  const url = `http://127.0.0.1:${port}`
  const adminUrl = `http://127.0.0.1:${adminPort}`
  await waitHttp(`http://127.0.0.1:${backendPort}/v1/pets`)
  await waitHttp(`${adminUrl}/healthz`)
  const pid = gateway.pid ?? 0

  const pool = new Pool(url, { connections: 32, pipelining: 1 })
  const counts = new Map<string, number>()
  let inFlight = 0
  let errors = 0
  const auth = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` })
  function fire (kind: string): void {
    if (inFlight >= MAX_IN_FLIGHT) { counts.set('skipped', (counts.get('skipped') ?? 0) + 1); return }
    let opts: Parameters<Pool['request']>[0]
    switch (kind) {
      case 'deprecated': opts = { method: 'GET', path: '/v1/pets/1', headers: auth(KEYS.valid) }; break
      case 'invalid': opts = { method: 'GET', path: '/v1/pets', headers: auth(`psk_wrong_${randomBytes(6).toString('hex')}`) }; break
      case 'banned': opts = { method: 'GET', path: '/v1/pets', headers: auth(KEYS.banned) }; break
      case 'limited': opts = { method: 'GET', path: '/v1/store/orders', headers: auth(KEYS.limited) }; break
      case 'post': opts = { method: 'POST', path: '/v1/pets', headers: { ...auth(KEYS.valid), 'content-type': 'application/json' }, body: '{"name":"soak","categoryId":1}' }; break
      default: opts = { method: 'GET', path: '/v1/pets?limit=5', headers: auth(KEYS.valid) }
    }
    inFlight++
    pool.request(opts).then(async (res) => {
      await res.body.dump()
      const key = `${kind} ${res.statusCode}`
      counts.set(key, (counts.get(key) ?? 0) + 1)
    }, () => { errors++ }).finally(() => { inFlight-- })
  }

  // Fractional request budgets accumulate per tick, so the rate is exact on average.
  const budget = new Map<string, number>()
  const tick = setInterval(() => {
    const add = (kind: string, perSecond: number): void => {
      let b = (budget.get(kind) ?? 0) + perSecond * TICK_MS / 1000
      while (b >= 1) { fire(kind); b-- }
      budget.set(kind, b)
    }
    for (const { kind, share } of MIX) add(kind, rate * share)
    add('limited', LIMITED_PER_SECOND)
  }, TICK_MS)

  interface Sample { minute: string, rssMiB: number, lagP99Ms: number, lagMaxMs: number, requests: number, warm: boolean }
  const samples: Sample[] = []
  const started = Date.now()
  let lastTotal = 0
  console.log(`soak: ${minutes} min at ${rate} req/s (+${LIMITED_PER_SECOND}/s limited), warm-up ${warmupMinutes} min, gateway pid ${pid}`)
  console.log('  t(min)  RSS MiB  lag p99 ms  lag max ms  req/10s')
  while (Date.now() - started < minutes * 60_000 && process.exitCode === undefined) {
    await new Promise((resolve) => setTimeout(resolve, SAMPLE_MS))
    const total = [...counts.values()].reduce((a, b) => a + b, 0)
    const l = await lag(adminUrl)
    const elapsed = (Date.now() - started) / 60_000
    const sample = { minute: elapsed.toFixed(2), rssMiB: rssMiB(pid), lagP99Ms: l.p99, lagMaxMs: l.max, requests: total - lastTotal, warm: elapsed >= warmupMinutes }
    lastTotal = total
    samples.push(sample)
    console.log(`  ${sample.minute.padStart(6)}  ${sample.rssMiB.toFixed(1).padStart(7)}  ${l.p99.toFixed(1).padStart(10)}  ${l.max.toFixed(1).padStart(10)}  ${String(sample.requests).padStart(7)}${sample.warm ? '' : '  (warm-up)'}`)
  }
  clearInterval(tick)
  await pool.close()

  const measured = samples.filter((s) => s.warm)
  const baseline = measured[0]?.rssMiB ?? NaN
  const tail = measured.slice(-3).map((s) => s.rssMiB).sort((a, b) => a - b)
  const final = tail[Math.floor(tail.length / 2)] ?? NaN
  const growth = (final - baseline) / baseline
  const byStatus = Object.fromEntries([...counts].sort())
  const fiveXX = [...counts].filter(([k]) => / 5\d\d$/.test(k)).reduce((a, [, n]) => a + n, 0)
  const expectations = {
    'valid 200': (counts.get('valid 200') ?? 0) > 0,
    'limited 429 and 200': (counts.get('limited 429') ?? 0) > 0 && (counts.get('limited 200') ?? 0) > 0,
    'banned 429': (counts.get('banned 429') ?? 0) > 0,
    'invalid 401': (counts.get('invalid 401') ?? 0) > 0,
    'deprecated 200': (counts.get('deprecated 200') ?? 0) > 0
  }
  const ok = Number.isFinite(growth) && growth <= MAX_RSS_GROWTH && fiveXX === 0 && errors === 0 && Object.values(expectations).every(Boolean) && process.exitCode === undefined
  const result = {
    minutes, rate, warmupMinutes, baselineRssMiB: baseline, finalRssMiB: final, rssGrowthPct: Math.round(growth * 1000) / 10,
    maxLagP99Ms: Math.max(...measured.map((s) => s.lagP99Ms)), requests: lastTotal, clientErrors: errors, fiveXX, byStatus, expectations, ok, samples
  }
  mkdirSync(join(ROOT, 'bench', 'results'), { recursive: true })
  writeFileSync(join(ROOT, 'bench', 'results', `soak-${minutes}m.json`), JSON.stringify(result, null, 2) + '\n')
  console.log(`RSS after warm-up ${baseline.toFixed(1)} MiB → ${final.toFixed(1)} MiB (${result.rssGrowthPct} %, limit ${MAX_RSS_GROWTH * 100} %); max lag p99 ${result.maxLagP99Ms.toFixed(1)} ms`)
  console.log(`requests ${lastTotal}, 5xx ${fiveXX}, client errors ${errors}; by kind and status: ${JSON.stringify(byStatus)}`)
  console.log(ok ? 'soak: PASS' : `soak: FAIL ${JSON.stringify(expectations)}`)
  if (!ok) process.exitCode = 1
}

async function stopAll (): Promise<void> {
  stopping = true
  await Promise.all(children.map(async (child) => {
    if (child.exitCode !== null || child.signalCode !== null) return
    await new Promise<void>((resolve) => { child.once('exit', () => resolve()); child.kill('SIGTERM') })
  }))
  rmSync(dir, { recursive: true, force: true })
}

main().catch((err: unknown) => { console.error(err); process.exitCode = 1 }).finally(() => { void stopAll() })
