// What one anonymous client costs in the in-process store's anonymous table (the README promised
// about 1 KB; attack testing measured about 1.9 KB of RSS). Two measurements:
// - the table alone, in this process: N distinct anonymous ids consumed through the real store,
//   heap and ArrayBuffer memory (the windows' typed arrays live outside the heap) and RSS after a
//   full GC, before and after, divided by N;
// - a real gateway process (what an operator sees): N distinct X-Forwarded-For addresses through a
//   trusted proxy, the process's RSS before and after, divided by N (RSS also carries allocator
//   slack and whatever else the requests allocated, so it is the upper figure).
//   node --expose-gc --import ./src/ts-resolve.ts bench/anonymous-memory.ts [--clients N]
// writes bench/results/anonymous-memory.json. Loopback only; bounded by N.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { anonymousId } from '../src/gateway/limiter/consumer-id.js'
import { createMemoryStore } from '../src/gateway/limiter/memory/store.js'
import { askOf } from '../src/gateway/limiter/store.js'
import { addressOf, floodThroughProxy } from '../test/helpers/edge-flood.js'
import { freePort, REPO_ROOT, startBackend, startNode, stopAll, waitForHttp } from './lib/processes.js'

const LIMITS = { perMinute: 30, perDay: 300 }
const DEFAULT_CLIENTS = 100_000
const SETTLE_MS = 2_000
/** Clients sent before the measurement (JIT, pools, first-request allocations are no per-client cost). */
const WARM_UP_CLIENTS = 2_000

interface Usage { rss: number, heapUsed: number, arrayBuffers: number, external: number }

function usage (): Usage {
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc === undefined) throw new Error('run with node --expose-gc')
  gc()
  gc()
  const { rss, heapUsed, arrayBuffers, external } = process.memoryUsage()
  return { rss, heapUsed, arrayBuffers, external }
}

const perClient = (before: number, after: number, n: number): number => Math.round((after - before) / n)

async function tableAlone (n: number): Promise<Record<string, number>> {
  const store = createMemoryStore({ maxAnonymousStates: n })
  const before = usage()
  for (let i = 0; i < n; i++) await store.consume(anonymousId(addressOf(10, i)), askOf(LIMITS))
  const after = usage()
  const result = {
    clients: n,
    heapBytesPerClient: perClient(before.heapUsed, after.heapUsed, n),
    arrayBufferBytesPerClient: perClient(before.arrayBuffers, after.arrayBuffers, n),
    heapPlusExternalBytesPerClient: perClient(before.heapUsed + before.external, after.heapUsed + after.external, n),
    rssBytesPerClient: perClient(before.rss, after.rss, n)
  }
  await store.close()
  return result
}

function rssBytes (pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('VmRSS')) ?? ''
  return Number(/(\d+)/.exec(line)?.[1] ?? NaN) * 1024
}

async function gatewayProcess (n: number): Promise<Record<string, number>> {
  const dir = mkdtempSync(join(tmpdir(), 'anonymous-memory-'))
  try {
    const backend = await startBackend(dir)
    const [port, adminPort] = [await freePort(), await freePort()]
    const gateway = startNode([join(REPO_ROOT, 'src', 'gateway', 'server.ts')], {
      env: {
        GATEWAY_HOST: '127.0.0.1', GATEWAY_PORT: String(port), ADMIN_PORT: String(adminPort), BACKEND_URL: backend.url,
        CONFIG_DIR: join(REPO_ROOT, 'config'), CONFIG_WATCH: 'false', LOG_LEVEL: 'warn', TRUST_PROXY: '1', ANONYMOUS_STATE_MAX: String(WARM_UP_CLIENTS + n)
      }
    })
    await waitForHttp(`http://127.0.0.1:${adminPort}/healthz`)
    const origin = `http://127.0.0.1:${port}`
    await floodThroughProxy(origin, WARM_UP_CLIENTS)
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS))
    const before = rssBytes(gateway.pid ?? 0)
    // The warm-up's clients again (their states exist), then n new ones.
    const statuses = await floodThroughProxy(origin, WARM_UP_CLIENTS + n)
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS))
    const after = rssBytes(gateway.pid ?? 0)
    return { clients: n, answered401: statuses.get(401) ?? 0, rssMiBBefore: Math.round(before / 2 ** 20), rssMiBAfter: Math.round(after / 2 ** 20), rssBytesPerClient: perClient(before, after, n) }
  } finally {
    await stopAll()
    rmSync(dir, { recursive: true, force: true })
  }
}

async function main (): Promise<void> {
  const { values } = parseArgs({ options: { clients: { type: 'string' } } })
  const n = Number(values.clients ?? DEFAULT_CLIENTS)
  const table = await tableAlone(n)
  console.log('table alone:', JSON.stringify(table))
  const processRss = await gatewayProcess(n)
  console.log('gateway process:', JSON.stringify(processRss))
  const out = join(REPO_ROOT, 'bench', 'results', 'anonymous-memory.json')
  writeFileSync(out, JSON.stringify({ at: new Date().toISOString(), node: process.version, table, process: processRss }, null, 2) + '\n')
  console.log(`wrote ${out}`)
}

main().catch(async (err: unknown) => {
  console.error(err)
  await stopAll()
  process.exit(1)
})
