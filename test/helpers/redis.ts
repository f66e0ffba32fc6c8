// Real redis-server processes for tests: a standalone server (with stop/start for fault tests) and
// a 3-master Cluster made with `redis-cli --cluster create`, each on free loopback ports, killed in
// teardown. No persistence: every test starts from an empty Redis.
import { spawn, execFile, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import type { Test } from 'tap'
import { until } from './poll.js'
import { isFree } from './ports.js'

const run = promisify(execFile)
const CLUSTER_BUS_OFFSET = 10_000

/**
 * The ports Redis may take: below the kernel's ephemeral range (where listen(0) and every outgoing
 * connection take theirs), the cluster bus port (+10000) too, so only another Redis of the tests can take the same one.
 */
export function redisPortRange (): { low: number, high: number } {
  let ephemeralLow = 32_768
  try {
    ephemeralLow = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || ephemeralLow
  } catch {
    // not Linux: the usual low end
  }
  return { low: 10_000, high: Math.max(12_000, ephemeralLow - CLUSTER_BUS_OFFSET) }
}

/** A port whose cluster bus port (+10000) is free too; another test's Redis may still take it first (startOnFreePort retries). */
async function freeRedisPort (): Promise<number> {
  const { low, high } = redisPortRange()
  for (;;) {
    const port = low + Math.floor(Math.random() * (high - low))
    if (await isFree(port) && await isFree(port + CLUSTER_BUS_OFFSET)) return port
  }
}

export async function redisCli (port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args])
  return stdout.trim()
}

/** Script calls Redis ran since its stats were reset: grants, and each process's epoch reads when it (re)connects. */
export async function scriptCalls (cli: (...args: string[]) => Promise<string>): Promise<number> {
  const info = await cli('INFO', 'commandstats')
  const calls = (name: string): number => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info)?.[1] ?? 0)
  return calls('evalsha') + calls('eval')
}

/**
 * The epoch mark a Redis that has served gateways before holds (limiter/lua/epoch.lua): with it a
 * gateway's first start does not wait out the recovery barrier that a Redis without one (new, or
 * one that lost its data) imposes. startRedis plants it unless told the Redis is new.
 */
export const DEPLOYED_EPOCH = 'deployed,0'

export interface RedisProcess {
  port: number
  url: string
  /** Stops the server (SIGTERM) and waits for it to exit. */
  stop: () => Promise<void>
  /** Starts it again on the same port (empty). */
  start: () => Promise<void>
  /** Sends a signal to the running server (SIGKILL to crash it, SIGSTOP/SIGCONT to freeze it). */
  signal: (signal: NodeJS.Signals) => void
  /** The running server's pid. */
  pid: () => number
  cli: (...args: string[]) => Promise<string>
}

function serverArgs (port: number, extra: string[]): string[] {
  return ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no', ...extra]
}

/**
 * Starts redis-server on `port` and waits until it answers as itself (its pid: another test's Redis may hold the
 * port); rejects as soon as it exits instead (its port was taken).
 */
async function startServer (port: number, extra: string[], cwd: string): Promise<ChildProcess> {
  const child = spawn('redis-server', serverArgs(port, extra), { cwd, stdio: 'ignore' })
  const gone = (): boolean => child.exitCode !== null || child.signalCode !== null
  const ours = async (): Promise<boolean> => (await redisCli(port, 'INFO', 'server')).includes(`process_id:${child.pid ?? -1}\r`)
  await until(`redis-server :${port}`, async () => gone() || await ours())
  if (gone()) throw new Error(`redis-server :${port} exited (${child.signalCode ?? child.exitCode}) before it answered`)
  return child
}

/**
 * A redis-server on a free port. Between the check that a port is free and the server's bind, another test file's
 * Redis can take it: the server then exits at once, and another port is tried.
 */
export async function startOnFreePort (argsFor: (port: number) => string[], cwd: string, choosePort: () => Promise<number> = freeRedisPort): Promise<{ port: number, child: ChildProcess }> {
  for (let attempt = 1; ; attempt++) {
    const port = await choosePort()
    try {
      return { port, child: await startServer(port, argsFor(port), cwd) }
    } catch (err) {
      if (attempt >= 5) throw err
    }
  }
}

async function stopServer (child: ChildProcess | undefined): Promise<void> {
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) return
  await new Promise<void>((resolve) => {
    child.once('exit', () => resolve())
    child.kill('SIGTERM')
    child.kill('SIGCONT') // a fault test may have left it stopped (SIGSTOP): let it see the SIGTERM
  })
}

export async function startRedis (t: Pick<Test, 'teardown'>, extra: string[] = [], opts: { fresh?: boolean } = {}): Promise<RedisProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-redis-'))
  const started = await startOnFreePort(() => extra, dir)
  const port = started.port
  let child: ChildProcess | undefined = started.child
  if (opts.fresh !== true) await redisCli(port, 'SET', 'rl:{#epoch}', DEPLOYED_EPOCH)
  t.teardown(async () => {
    await stopServer(child)
    rmSync(dir, { recursive: true, force: true })
  })
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    stop: async () => { await stopServer(child); child = undefined },
    start: async () => { child = await startServer(port, extra, dir) },
    signal: (signal) => { child?.kill(signal) },
    pid: () => child?.pid ?? 0,
    cli: (...args) => redisCli(port, ...args)
  }
}

export interface RedisClusterProcess {
  ports: number[]
  /** `host:port` seeds, as REDIS_CLUSTER_NODES takes them. */
  nodes: string[]
  cli: (port: number, ...args: string[]) => Promise<string>
  /** Sends a signal to the master on `port` (SIGKILL: lose that node). */
  signal: (port: number, signal: NodeJS.Signals) => void
}

/** `extra`: more redis-server arguments for every node (e.g. `--cluster-require-full-coverage no`). */
export async function startRedisCluster (t: Test, size = 3, extra: string[] = []): Promise<RedisClusterProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-redis-cluster-'))
  const ports: number[] = []
  const children: ChildProcess[] = []
  t.teardown(async () => {
    await Promise.all(children.map(stopServer))
    rmSync(dir, { recursive: true, force: true })
  })
  for (let i = 0; i < size; i++) {
    const { port, child } = await startOnFreePort((port) => ['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`, '--cluster-node-timeout', '2000', ...extra], dir)
    ports.push(port)
    children.push(child)
  }
  const nodes = ports.map((p) => `127.0.0.1:${p}`)
  await run('redis-cli', ['--cluster', 'create', ...nodes, '--cluster-replicas', '0', '--cluster-yes'])
  await until('redis cluster', async () => {
    const infos = await Promise.all(ports.map((p) => redisCli(p, 'CLUSTER', 'INFO')))
    return infos.every((info) => info.includes('cluster_state:ok'))
  }, 20_000)
  return { ports, nodes, cli: (port, ...args) => redisCli(port, ...args), signal: (port, signal) => { children[ports.indexOf(port)]?.kill(signal) } }
}

export interface RedisSentinelProcess {
  port: number
  masterName: string
}

/** A real Sentinel (`redis-server --sentinel`) monitoring `master`, ready once it names the master's address. */
export async function startRedisSentinel (t: Test, master: RedisProcess, masterName = 'petstore'): Promise<RedisSentinelProcess> {
  const port = await freeRedisPort()
  const dir = mkdtempSync(join(tmpdir(), 'petstore-sentinel-'))
  const conf = join(dir, 'sentinel.conf')
  writeFileSync(conf, [
    `port ${port}`, 'bind 127.0.0.1', `dir ${dir}`,
    `sentinel monitor ${masterName} 127.0.0.1 ${master.port} 1`,
    `sentinel down-after-milliseconds ${masterName} 5000`, ''
  ].join('\n'))
  const child = spawn('redis-server', [conf, '--sentinel'], { cwd: dir, stdio: 'ignore' })
  t.teardown(async () => {
    await stopServer(child)
    rmSync(dir, { recursive: true, force: true })
  })
  await until(`redis-sentinel :${port}`, async () =>
    (await redisCli(port, 'SENTINEL', 'get-master-addr-by-name', masterName)).split('\n')[1] === String(master.port))
  return { port, masterName }
}

/**
 * Every command `port`'s server runs, as MONITOR reports it (its arguments and the client's address),
 * from a `redis-cli MONITOR` child until teardown; resolves once watching. Not ioredis's monitor():
 * on a server already busy with other clients' commands, its first lines can arrive before the
 * connection is in monitor mode ("Command queue state error").
 */
export async function monitorCommands (t: Pick<Test, 'teardown'>, port: number, onCommand: (args: string[], source: string) => void): Promise<void> {
  const child = spawn('redis-cli', ['-h', '127.0.0.1', '-p', String(port), 'MONITOR'], { stdio: ['ignore', 'pipe', 'ignore'] })
  t.teardown(() => { child.kill() })
  child.stdout.setEncoding('utf8')
  let partial = ''
  await new Promise<void>((resolve, reject) => {
    child.once('error', reject)
    child.stdout.on('data', (chunk: string) => {
      const lines = (partial + chunk).split('\n')
      partial = lines.pop() ?? ''
      for (const line of lines) {
        if (line.trim() === 'OK') { resolve(); continue }
        const match = /^\S+ \[\d+ ([^\]]+)\] (.*)$/.exec(line)
        if (match === null) continue
        const args = [...(match[2] ?? '').matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => (m[1] ?? '').replace(/\\(["\\])/g, '$1'))
        onCommand(args, match[1] ?? '')
      }
    })
  })
}

/** The units of every reserve in a limiter hash's `r` field ('holder,units,untilMs;…'), 0 when there is none. */
export function reserveUnits (field: string): number {
  return field.split(';').filter((e) => e !== '').reduce((n, e) => n + Number(e.split(',')[1]), 0)
}
