// The idle-connection lockout at full size (test/gateway/edge/connection-*.test.ts hold it at test
// size): a gateway process with its default connection limits; one attacker address opens
// `--connections` keep-alive connections (default 10,050: just over MAX_CONNECTIONS), sends one
// anonymous request on each and leaves it open; then newcomers from other addresses each try one
// request. Reported: how many attacker connections the gateway still holds, how the newcomers
// fare (answered, or reset) and how long they wait, and the gateway's connection metrics.
// Two scenarios: `refused` (the anonymous limit answers 429 from the 31st request on, as in the
// attack) and `admitted` (the anonymous limit unbounded, so every request is answered 401 and only
// the connection caps stand in the way).
//   node --import ./src/ts-resolve.ts bench/connection-flood.ts [--connections N] [--newcomers N] [--label L]
// writes bench/results/connection-flood-<label>.json. Loopback only; every phase is bounded.
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { openKeptAlive, type KeptAlive } from '../test/helpers/kept-alive.js'
import { poll } from '../test/helpers/poll.js'
import { parseScrape, sampleValue } from '../test/helpers/scrape.js'
import { freePort, REPO_ROOT, startBackend, startNode, stopAll, waitForHttp } from './lib/processes.js'

const ATTACKER = '127.0.50.1'
const CONCURRENCY = 64
const PHASE_TIMEOUT_MS = 120_000
const SETTLE_MS = 3_000

interface Scenario { name: 'refused' | 'admitted', anonymous: string }
const SCENARIOS: Scenario[] = [
  { name: 'refused', anonymous: '{ perMinute: 30, perDay: 300 }' },
  { name: 'admitted', anonymous: '{ perMinute: 1000000000, perDay: 1000000000000 }' }
]

function configDir (scenario: Scenario): string {
  const dir = mkdtempSync(join(tmpdir(), 'connection-flood-'))
  for (const file of ['keys.yaml', 'routes.yaml']) writeFileSync(join(dir, file), readFileSync(join(REPO_ROOT, 'config', file)))
  const plans = readFileSync(join(REPO_ROOT, 'config', 'plans.yaml'), 'utf8').replace(/^anonymous: .*$/m, `anonymous: ${scenario.anonymous}`)
  writeFileSync(join(dir, 'plans.yaml'), plans)
  return dir
}

function kib (pid: number, field: string): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith(field))
  return Number(/(\d+)/.exec(line ?? '')?.[1] ?? NaN)
}

async function flood (port: number, count: number): Promise<{ connections: KeptAlive[], statuses: Record<string, number> }> {
  const connections: KeptAlive[] = []
  const statuses: Record<string, number> = {}
  let next = 0
  async function worker (): Promise<void> {
    while (next < count) {
      next++
      let outcome: string
      try {
        const c = await openKeptAlive({ port }, ATTACKER)
        connections.push(c)
        outcome = String((await c.send()).status)
      } catch {
        outcome = 'reset'
      }
      statuses[outcome] = (statuses[outcome] ?? 0) + 1
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
  return { connections, statuses }
}

async function newcomer (port: number, n: number): Promise<{ outcome: string, ms: number }> {
  const started = performance.now()
  try {
    const c = await openKeptAlive({ port }, `127.0.60.${1 + n}`)
    const res = await c.send()
    c.destroy()
    return { outcome: String(res.status), ms: performance.now() - started }
  } catch {
    return { outcome: 'reset', ms: performance.now() - started }
  }
}

async function run (scenario: Scenario, count: number, newcomers: number): Promise<Record<string, unknown>> {
  const dir = configDir(scenario)
  try {
    const backend = await startBackend(dir)
    const [port, adminPort] = [await freePort(), await freePort()]
    const gateway = startNode([join(REPO_ROOT, 'src', 'gateway', 'server.ts')], {
      env: { GATEWAY_HOST: '127.0.0.1', GATEWAY_PORT: String(port), ADMIN_PORT: String(adminPort), BACKEND_URL: backend.url, CONFIG_DIR: dir, CONFIG_WATCH: 'false', LOG_LEVEL: 'warn' }
    })
    await waitForHttp(`http://127.0.0.1:${adminPort}/healthz`)
    const rssBefore = kib(gateway.pid ?? 0, 'VmRSS')
    const started = performance.now()
    const { connections, statuses } = await flood(port, count)
    const floodMs = performance.now() - started
    // Let the closes the gateway decided arrive; stop when the count holds still.
    let open = -1
    await poll(async () => {
      const now = connections.filter((c) => !c.closed).length
      const stable = now === open
      open = now
      await new Promise((resolve) => setTimeout(resolve, SETTLE_MS))
      return stable
    }, PHASE_TIMEOUT_MS)
    const results = []
    for (let n = 0; n < newcomers; n++) results.push(await newcomer(port, n))
    const outcomes: Record<string, number> = {}
    for (const r of results) outcomes[r.outcome] = (outcomes[r.outcome] ?? 0) + 1
    const samples = parseScrape(await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text())
    const metric = (name: string, labels: Record<string, string> = {}): number | null => sampleValue(samples, name, labels) ?? null
    const report = {
      scenario: scenario.name,
      attackerConnections: count,
      floodSeconds: Math.round(floodMs) / 1000,
      attackerStatuses: statuses,
      attackerStillOpen: open,
      newcomers: outcomes,
      newcomerMaxMs: Math.round(Math.max(...results.map((r) => r.ms)) * 10) / 10,
      gatewayFds: readdirSync(`/proc/${gateway.pid ?? 0}/fd`).length,
      gatewayRssMiB: { before: Math.round(rssBefore / 1024), after: Math.round(kib(gateway.pid ?? 0, 'VmRSS') / 1024) },
      metrics: {
        open: metric('gateway_connections_open'),
        refusedClientCap: metric('gateway_connections_refused_total', { reason: 'client_cap' }),
        refusedServerCap: metric('gateway_connections_refused_total', { reason: 'server_cap' }),
        reclaimedClientCap: metric('gateway_connections_reclaimed_total', { reason: 'client_cap' }),
        reclaimedServerCap: metric('gateway_connections_reclaimed_total', { reason: 'server_cap' }),
        closedOverLimit: metric('gateway_connections_closed_over_limit_total')
      }
    }
    for (const c of connections) c.destroy()
    return report
  } finally {
    await stopAll()
    rmSync(dir, { recursive: true, force: true })
  }
}

async function main (): Promise<void> {
  const { values } = parseArgs({ options: { connections: { type: 'string' }, newcomers: { type: 'string' }, label: { type: 'string' } } })
  const count = Number(values.connections ?? 10_050)
  const newcomers = Number(values.newcomers ?? 50)
  const reports = []
  for (const scenario of SCENARIOS) {
    const report = await run(scenario, count, newcomers)
    console.log(JSON.stringify(report))
    reports.push(report)
  }
  const out = join(REPO_ROOT, 'bench', 'results', `connection-flood-${values.label ?? 'latest'}.json`)
  writeFileSync(out, JSON.stringify({ at: new Date().toISOString(), reports }, null, 2) + '\n')
  console.log(`wrote ${out}`)
}

main().catch(async (err: unknown) => {
  console.error(err)
  await stopAll()
  process.exit(1)
})
