// Connection slots nobody can squat, at full size (issue 33 row 1; test/gateway/edge/
// connection-squat.test.ts holds it at test size): a gateway process with its default listener
// (MAX_CONNECTIONS 10,000, MAX_CONNECTIONS_PER_CLIENT 1,024); an attacker process holding
// connections that never send a byte — 11 loopback addresses × 920, then 256 IPv6 /64 prefixes × 40,
// each address under its cap, each connection reopened as soon as the gateway closes it — and
// meanwhile two victims on other addresses, 10 requests/s each for SQUAT_SECONDS: one opening a new
// connection per request, one on a kept-alive connection it opened before the attack (reopened if
// the gateway closes it). Reported: the victims' answers and latency (target: ≥ 99 % answered,
// p99 ≤ 200 ms), the gateway's connection metrics and CPU, the attacker's reconnects. The attacker
// runs at nice 19: reopening thousands of connections a second costs it a core, which in reality
// is the attacker's own, not the backend's and the victims' it would share here; what the churn
// costs the gateway is its CPU, reported.
//   node --import ./src/ts-resolve.ts bench/idle-squat.ts      Env: SQUAT_SECONDS [20] BENCH_BASELINE=<checkout>
//   (also the gateway of another checkout, first: `git archive` of an older commit with
//   node_modules linked in) SQUAT_SCENARIOS [ipv4,ipv6] BENCH_PIN [1]
// Writes bench/results/idle-squat.md and .json. Loopback (and 2001:db8::/48 routed to lo) only;
// every phase is bounded and every process is stopped by PID.
import { spawn, type ChildProcess } from 'node:child_process'
import { join } from 'node:path'
import { cpus, loadavg } from 'node:os'
import { createInterface } from 'node:readline'
import { setUpIpv6Loopback } from '../test/helpers/ipv6-loopback.js'
import { openKeptAlive } from '../test/helpers/kept-alive.js'
import { poll, sleep } from '../test/helpers/poll.js'
import { parseScrape, sampleValue } from '../test/helpers/scrape.js'
import { percentileOf, victimKeptAlive, victimOnNewConnections, type VictimResult } from '../test/helpers/victim.js'
import { cpuMicros } from './lib/proc-cpu.js'
import { freePort, REPO_ROOT, sourceLoaderArgs, startNode, stop, waitForHttp } from './lib/processes.js'
import { intFromEnv, log, round1, writeResults } from './lib/report.js'
import { finishBench, prepareBench, type BenchSetup } from './lib/targets.js'

const VICTIM_RATE = 10
const FILL_TIMEOUT_MS = 30_000
/** The attack holds the listener once it is this full (the gateway's "nearly full", where its short head deadline applies). */
const HELD_SHARE = 0.9
const SETTLE_MS = 2_000
const LISTENER = 10_000
const TOKEN = 'bench-key-0'

interface Scenario { name: string, listen: string, addresses: string[], perAddress: number, victimNew: string, victimKept: string }

const SCENARIOS: Scenario[] = [
  {
    name: 'ipv4',
    listen: '127.0.0.1',
    addresses: Array.from({ length: 11 }, (_, i) => `127.0.100.${i + 1}`),
    perAddress: 920,
    victimNew: '127.0.101.1',
    victimKept: '127.0.101.2'
  },
  {
    name: 'ipv6',
    listen: '2001:db8::1',
    // 256 /64 prefixes of 2001:db8:0:100::/56, one address each.
    addresses: Array.from({ length: 256 }, (_, i) => `2001:db8:0:1${i.toString(16).padStart(2, '0')}::a`),
    perAddress: 40,
    victimNew: '2001:db8:0:ff00::1',
    victimKept: '2001:db8:0:ff01::1'
  }
]

async function metrics (adminUrl: string): Promise<Record<string, number | null>> {
  const samples = parseScrape(await (await fetch(`${adminUrl}/metrics`)).text())
  const value = (name: string, labels: Record<string, string> = {}): number | null => sampleValue(samples, name, labels) ?? null
  return {
    open: value('gateway_connections_open'),
    unused: value('gateway_connections_unused'),
    unusedClosedHeadTimeout: value('gateway_connections_unused_closed_total', { reason: 'head_timeout' }),
    unusedClosedServerCap: value('gateway_connections_unused_closed_total', { reason: 'server_cap' }),
    reclaimedIdleServerCap: value('gateway_connections_reclaimed_total', { reason: 'server_cap' }),
    refusedServerCap: value('gateway_connections_refused_total', { reason: 'server_cap' }),
    refusedClientCap: value('gateway_connections_refused_total', { reason: 'client_cap' })
  }
}

function lines (child: ChildProcess): AsyncIterator<string> {
  if (child.stdout === null) throw new Error('attacker has no stdout')
  return createInterface({ input: child.stdout })[Symbol.asyncIterator]()
}

function victimSummary (r: VictimResult): Record<string, unknown> {
  return {
    sent: r.sent,
    answered: r.answered,
    answeredPercent: round1(100 * r.answered / Math.max(1, r.sent)),
    p50Ms: round1(percentileOf(r.latencies, 50)),
    p99Ms: round1(percentileOf(r.latencies, 99)),
    maxMs: round1(percentileOf(r.latencies, 100)),
    statuses: r.statuses,
    failures: r.failures,
    reconnects: r.reconnects
  }
}

async function run (setup: BenchSetup, scenario: Scenario, label: string, root: string, seconds: number): Promise<Record<string, unknown>> {
  const [port, adminPort] = [await freePort(), await freePort()]
  const gateway = startNode([join(root, 'src', 'gateway', 'server.ts')], {
    cpus: setup.serverCpus,
    env: { GATEWAY_HOST: scenario.listen, GATEWAY_PORT: String(port), ADMIN_PORT: String(adminPort), BACKEND_URL: setup.backendUrl, CONFIG_DIR: setup.configDir, CONFIG_WATCH: 'false', LOG_LEVEL: 'warn', NODE_ENV: 'bench', REDIS_URL: '' }
  })
  const adminUrl = `http://127.0.0.1:${adminPort}`
  let attacker: ChildProcess | undefined
  try {
    await waitForHttp(`${adminUrl}/healthz`)
    const target = { host: scenario.listen, port }
    const kept = await openKeptAlive(target, scenario.victimKept)
    await kept.send(`GET /v1/pets?limit=1 HTTP/1.1\r\nhost: gateway\r\nauthorization: Bearer ${TOKEN}`)
    const attackSeconds = Math.ceil((FILL_TIMEOUT_MS + SETTLE_MS) / 1000) + seconds + 30
    attacker = spawn('nice', ['-n', '19', process.execPath, ...sourceLoaderArgs(join(REPO_ROOT, 'bench', 'lib', 'silent-attacker.ts')), join(REPO_ROOT, 'bench', 'lib', 'silent-attacker.ts'),
      scenario.listen, String(port), String(scenario.perAddress), String(attackSeconds), ...scenario.addresses], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] })
    const out = lines(attacker)
    const filled = JSON.parse(String((await out.next()).value)) as { filled: number }
    await poll(async () => ((await metrics(adminUrl)).open ?? 0) >= HELD_SHARE * LISTENER, FILL_TIMEOUT_MS, 100)
    await sleep(SETTLE_MS)
    const during = await metrics(adminUrl)
    const cpuBefore = cpuMicros(gateway.pid)
    const attackerCpuBefore = cpuMicros(attacker.pid)
    const [fresh, alive] = await Promise.all([
      victimOnNewConnections(target, scenario.victimNew, { count: seconds * VICTIM_RATE, intervalMs: 1000 / VICTIM_RATE, key: TOKEN }),
      victimKeptAlive(target, scenario.victimKept, { count: seconds * VICTIM_RATE, intervalMs: 1000 / VICTIM_RATE, key: TOKEN }, kept)
    ])
    const gatewayCpuPercent = round1(100 * (cpuMicros(gateway.pid) - cpuBefore) / (seconds * 1e6))
    const attackerCpuPercent = round1(100 * (cpuMicros(attacker.pid) - attackerCpuBefore) / (seconds * 1e6))
    const after = await metrics(adminUrl)
    attacker.kill('SIGTERM')
    const attack = JSON.parse(String((await out.next()).value ?? '{}')) as Record<string, number>
    const report = {
      label,
      scenario: scenario.name,
      attacker: { addresses: scenario.addresses.length, perAddress: scenario.perAddress, filled: filled.filled, ...attack },
      gatewayDuringAttack: during,
      gatewayAfter: after,
      gatewayCpuPercent,
      attackerCpuPercent,
      victimNewConnections: victimSummary(fresh),
      victimKeptAlive: victimSummary(alive)
    }
    log(`${label} ${scenario.name}: ${JSON.stringify(report)}`)
    return report
  } finally {
    if (attacker !== undefined) await stop(attacker)
    await stop(gateway)
  }
}

async function main (): Promise<void> {
  const seconds = intFromEnv('SQUAT_SECONDS', 20)
  const wanted = (process.env.SQUAT_SCENARIOS ?? 'ipv4,ipv6').split(',')
  const begun = Date.now()
  const loadAtStart = loadavg()
  const ipv6 = await setUpIpv6Loopback()
  const scenarios = SCENARIOS.filter((s) => wanted.includes(s.name) && (s.name !== 'ipv6' || ipv6))
  const roots: Array<[string, string]> = []
  const baseline = process.env.BENCH_BASELINE
  if (baseline !== undefined && baseline !== '') roots.push(['before', baseline])
  roots.push(['after', REPO_ROOT])
  let setup: BenchSetup | undefined
  const runs: Array<Record<string, unknown>> = []
  try {
    setup = await prepareBench('idle-squat', 1)
    for (const scenario of scenarios) for (const [label, root] of roots) runs.push(await run(setup, scenario, label, root, seconds))
  } finally {
    await finishBench(setup)
  }
  const cell = (r: Record<string, unknown>, key: string): string => {
    const v = r[key] as Record<string, unknown>
    return `${String(v.answered)}/${String(v.sent)} (${String(v.answeredPercent)} %) | ${String(v.p50Ms)} | ${String(v.p99Ms)} | ${String(v.maxMs)}`
  }
  const md = [
    '# Idle squat — silent connections against the full listener, and two victims meanwhile', '',
    `${new Date().toISOString()} · ${cpus().length} × ${cpus()[0]?.model ?? 'CPU'} · Node ${process.version} · load average at start ${loadAtStart.map((l) => l.toFixed(1)).join(' ')}, at end ${loadavg().map((l) => l.toFixed(1)).join(' ')} · ${Math.round((Date.now() - begun) / 1000)} s`, '',
    `Gateway defaults (MAX_CONNECTIONS 10,000, MAX_CONNECTIONS_PER_CLIENT 1,024). Attacker (own process): ipv4 = 11 addresses × 920, ipv6 = 256 /64 prefixes × 40; silent connections, each reopened as soon as it is closed. Victims for ${seconds} s at ${VICTIM_RATE}/s each, from other addresses: a new connection per request, and a kept-alive connection opened before the attack. Target: ≥ 99 % answered, p99 ≤ 200 ms.`, '',
    '| gateway | scenario | new connections: answered | p50 ms | p99 ms | max ms | kept-alive: answered | p50 ms | p99 ms | max ms | kept-alive reconnects | attacker reconnects | gateway CPU % | attacker CPU % |',
    '|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|',
    ...runs.map((r) => `| ${String(r.label)} | ${String(r.scenario)} | ${cell(r, 'victimNewConnections')} | ${cell(r, 'victimKeptAlive')} | ${String((r.victimKeptAlive as Record<string, unknown>).reconnects)} | ${String((r.attacker as Record<string, unknown>).closedByServer)} | ${String(r.gatewayCpuPercent)} | ${String(r.attackerCpuPercent)} |`),
    '',
    'Per run — the gateway\'s connection metrics during the attack and after the victims, the victims\' failures:', '',
    ...runs.map((r) => `- ${String(r.label)} ${String(r.scenario)}: during ${JSON.stringify(r.gatewayDuringAttack)}; after ${JSON.stringify(r.gatewayAfter)}; attacker ${JSON.stringify(r.attacker)}; new-connection victim ${JSON.stringify(r.victimNewConnections)}; kept-alive victim ${JSON.stringify(r.victimKeptAlive)}`),
    ''
  ]
  writeResults('idle-squat', md, { date: new Date().toISOString(), machine: { cpus: cpus().length, node: process.version, loadAverageAtStart: loadAtStart, loadAverageAtEnd: loadavg() }, seconds, runs })
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) await main()
