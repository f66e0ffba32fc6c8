// The servers a load bench measures, started the way users run them: the real gateway entry point
// configured from the environment, or a bench server script that prints its port. Shared by
// bench/run.ts, bench/overload.ts and bench/proxy-cost.ts so each measures the same thing.
import type { ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { writeConfigWithKeys } from '../config-load.js'
import { pinProcess, taskset } from './proc-cpu.js'
import { firstLine, freePort, REPO_ROOT, startBackend, startNode, stopAll, unboundPlans, waitForHttp } from './processes.js'

/** Pets the backend holds before a run, so `GET /v1/pets?limit=10` returns a full page. */
export const SEEDED_PETS = 20
export const DEFAULT_PATH = '/v1/pets?limit=10'
/** Cores of the pinned layout: the server under test alone on one, everything else on the other. */
export const SERVER_CPUS = '0'
export const REST_CPUS = '1'

/** `pid`: the process whose CPU is the configuration's (the backend's own for "direct"); `redisPid`: its Redis's, when it has one of its own. */
export interface Target { name: string, url: string, child: ChildProcess | undefined, pid: number | undefined, adminUrl?: string, redisPid?: number | undefined }

/** A bench server script (bench/servers/*.ts) that prints {"port":N} once listening. */
export async function startPrinting (name: string, script: string, args: string[], opts: { cpus?: string, nodeArgs?: string[] } = {}): Promise<Target> {
  const child = startNode([join(REPO_ROOT, script), ...args], { stdout: 'pipe', cpus: opts.cpus, nodeArgs: opts.nodeArgs })
  const { port } = JSON.parse(await firstLine(child)) as { port: number }
  return { name, url: `http://127.0.0.1:${port}`, child, pid: child.pid }
}

export interface GatewayChild {
  configDir: string
  backendUrl: string
  redisUrl?: string
  workers?: number
  logLevel?: string
  env?: Record<string, string>
  /** Another checkout's root (a baseline), default this one. */
  root?: string
  /** CPUs of a one-worker gateway (taskset), default: inherited. */
  cpus?: string
  nodeArgs?: string[]
  /** How long it may take to answer, default DEFAULT_READY_TIMEOUT_MS (a big config takes longer). */
  readyTimeoutMs?: number
}

/**
 * With BENCH_CHECKOUT_RUNTIME=1, the Node a checkout's own `npm ci` installed (node_modules/.bin/node), so a
 * baseline checkout on another runtime is measured on it (e.g. the same code on Node 22 and on Node 24);
 * otherwise, or when the checkout has none, undefined: this process's Node.
 */
function checkoutRuntime (root: string): string | undefined {
  if (process.env.BENCH_CHECKOUT_RUNTIME !== '1') return undefined
  const node = join(root, 'node_modules', '.bin', 'node')
  return existsSync(node) ? node : undefined
}

/** The real entry point (src/gateway/server.ts), configured from the environment as users run it. */
export async function startGateway (name: string, opts: GatewayChild): Promise<Target> {
  const port = await freePort()
  const adminPort = await freePort()
  const workers = opts.workers ?? 1
  const child = startNode([join(opts.root ?? REPO_ROOT, 'src', 'gateway', 'server.ts')], {
    node: checkoutRuntime(opts.root ?? REPO_ROOT),
    cpus: workers === 1 ? opts.cpus : undefined,
    nodeArgs: opts.nodeArgs,
    env: {
      GATEWAY_HOST: '127.0.0.1',
      GATEWAY_PORT: String(port),
      ADMIN_HOST: '127.0.0.1',
      ADMIN_PORT: String(adminPort),
      BACKEND_URL: opts.backendUrl,
      CONFIG_DIR: opts.configDir,
      CONFIG_WATCH: 'false',
      LOG_LEVEL: opts.logLevel ?? 'info',
      REDIS_URL: opts.redisUrl ?? '',
      REDIS_CLUSTER_NODES: '',
      REDIS_SENTINELS: '',
      GATEWAY_WORKERS: String(workers),
      NODE_ENV: 'bench',
      ...opts.env
    }
  })
  const url = `http://127.0.0.1:${port}`
  // A gateway that exits (a config it refuses, a plugin that did not start) says so at once, rather
  // than after the whole ready timeout as a gateway that "never came up".
  let onExit: (() => void) | undefined
  const exited = new Promise<never>((_resolve, reject) => {
    onExit = () => { reject(new Error(`${name}: the gateway exited (code ${String(child.exitCode ?? child.signalCode)}) before answering; its log is on stdout, run it alone to see it`)) }
    child.once('exit', onExit)
  })
  try {
    await Promise.race([waitForHttp(`${url}/healthz-not-a-route`, opts.readyTimeoutMs), exited])
  } finally {
    if (onExit !== undefined) child.off('exit', onExit)
  }
  return { name, url, child, pid: child.pid, adminUrl: `http://127.0.0.1:${adminPort}` }
}

export async function seed (backendUrl: string): Promise<void> {
  for (let i = 0; i < SEEDED_PETS; i++) {
    const res = await fetch(`${backendUrl}/v1/pets`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: `pet-${i}`, categoryId: 1 })
    })
    await res.arrayBuffer()
    if (res.status !== 201) throw new Error(`seeding answered ${res.status}`)
  }
}

/** Checks one request through a target is a 200 before it is measured (a bench of 401s measures nothing). */
export async function assertServes (target: Target, token: string, path = DEFAULT_PATH): Promise<void> {
  const res = await fetch(`${target.url}${path}`, { headers: { authorization: `Bearer ${token}` } })
  await res.arrayBuffer()
  if (res.status !== 200) throw new Error(`${target.name} answered ${res.status}`)
}

export interface BenchSetup {
  /** Whether this process (and so the backend and the load generators) runs on REST_CPUS. */
  pinned: boolean
  /** Where servers under test run: SERVER_CPUS when pinned. */
  serverCpus: string | undefined
  work: string
  backendUrl: string
  /** `keys` keys (`bench-key-<i>` in turn) on plans whose limits no run reaches. */
  configDir: string
}

/**
 * What a load bench starts before its servers: this process pinned (unless BENCH_PIN=0), a work
 * directory, the real backend with pets in it, a config; every child stopped on SIGINT/SIGTERM.
 */
export async function prepareBench (name: string, keys: number): Promise<BenchSetup> {
  const pinned = process.env.BENCH_PIN !== '0' && cpus().length >= 2 && taskset() !== null && pinProcess(process.pid, REST_CPUS)
  const work = mkdtempSync(join(tmpdir(), `petstore-${name}-`))
  const stopOnSignal = (): void => { void stopAll().then(() => process.exit(130)) }
  process.once('SIGINT', stopOnSignal)
  process.once('SIGTERM', stopOnSignal)
  const { url: backendUrl } = await startBackend(work)
  await seed(backendUrl)
  const configDir = writeConfigWithKeys(keys, join(work, 'config'))
  unboundPlans(configDir)
  return { pinned, serverCpus: pinned ? SERVER_CPUS : undefined, work, backendUrl, configDir }
}

/** Stops every child and removes the work directory. */
export async function finishBench (setup: BenchSetup | undefined): Promise<void> {
  await stopAll()
  if (setup !== undefined) rmSync(setup.work, { recursive: true, force: true })
}
