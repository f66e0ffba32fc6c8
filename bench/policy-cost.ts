// `npm run bench:policy`: the CPU the policy layer (auth, limiter, lifecycle, headers, metrics, the
// log line) adds to each proxied request, measured inside one process with Fastify's inject, so no
// client socket and no load generator share the measurement: process.cpuUsage() around batches of
// GET /v1/pets?limit=10 through the bare @fastify/http-proxy assembly and through the gateway (the
// in-process store, info logs to /dev/null, metrics on), alternated batch by batch. On a machine
// other work is loading, per-batch differences taken side by side and their median are far steadier
// than req/s. The backend is a child process (on CPU 1 with taskset; this process on CPU 0).
// BENCH_BASELINE=<dir>: also the gateway of another checkout (src/ of an older commit with
// node_modules linked in): before/after in the same run.
// Three traffic shapes through the same gateway: one hot key, 1,000 keys in turn and the bench's
// Zipf draw over 10,000 consumers (the same sequence as `npm run bench`, from its start in each batch):
// the difference between them is what one more distinct consumer costs per request.
// The same three shapes through the gateway on Redis (a redis-server of its own, pinned beside the backend: its CPU
// per request is read from /proc and printed beside the process's), when a redis-server starts: the Redis path's
// own cost per consumer (grant calls, their build and reply, the accounts) without a client socket in the way.
// Env: BENCH_ROUNDS [15] BENCH_BATCH [2000] BENCH_CONCURRENCY [16]; BENCH_REDIS=0 leaves the Redis subjects out;
// BENCH_SUBJECTS: a ';' list of subject-name fragments to run alone (the names hold commas), e.g. `gateway, zipf` or
// `Redis, zipf` to profile one under --cpu-prof.
// Writes bench/results/policy-cost.json (policy-cost-subset.json when BENCH_SUBJECTS narrows the run:
// its second column is then each row above the first subject's, per round).
import { existsSync, openSync, mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Fastify, { type FastifyInstance } from 'fastify'
import httpProxy from '@fastify/http-proxy'
import type * as AppModule from '../src/gateway/app.js'
import type * as ReadFilesModule from '../src/gateway/config/read-files.js'
import type * as LoggerModule from '../src/gateway/observability/logger.js'
import { writeConfigWithKeys } from './config-load.js'
import { median } from './lib/load.js'
import { DEFAULT_ZIPF_CONSUMERS, DEFAULT_ZIPF_EXPONENT, DEFAULT_ZIPF_SEED, DEFAULT_ZIPF_SEQUENCE_LENGTH, zipfSequence } from './lib/zipf.js'
import { mainThreadCpuMicros, pinProcess, taskset } from './lib/proc-cpu.js'
import { startScratchRedis, type ScratchRedis } from './lib/scratch-redis.js'
import { REPO_ROOT, startBackend, stopAll, unboundPlans } from './lib/processes.js'

export const DEFAULT_ROUNDS = 15
export const DEFAULT_BATCH = 2_000
export const DEFAULT_CONCURRENCY = 16
const PATH = '/v1/pets?limit=10'

interface Subject { name: string, app: FastifyInstance, tokens: string[], order?: readonly number[], redis?: ScratchRedis }

const intFromEnv = (name: string, fallback: number): number => {
  const raw = process.env[name]
  return raw === undefined || raw === '' ? fallback : Number.parseInt(raw, 10)
}

async function bare (backendUrl: string): Promise<FastifyInstance> {
  const { DEFAULT_UPSTREAM_CONNECTIONS, DEFAULT_UPSTREAM_PIPELINING } = await import('../src/gateway/proxy/plugin.js')
  const app = Fastify({ logger: false })
  await app.register(httpProxy, { upstream: backendUrl, prefix: '/v1', rewritePrefix: '/v1', undici: { connections: DEFAULT_UPSTREAM_CONNECTIONS, pipelining: DEFAULT_UPSTREAM_PIPELINING } })
  await app.ready()
  return app
}

/** The gateway of the checkout at `root`, built as server.ts builds it (info logs; the in-process store, or Redis at `redisUrl`). */
async function gateway (root: string, backendUrl: string, configDir: string, logFd: number, redisUrl?: string): Promise<FastifyInstance> {
  const { buildGateway } = await import(join(root, 'src', 'gateway', 'app.ts')) as typeof AppModule
  // loadConfigDir moved from loader.ts to read-files.ts; a baseline checkout may predate that.
  const configDirModule = join(root, 'src', 'gateway', 'config', existsSync(join(root, 'src', 'gateway', 'config', 'read-files.ts')) ? 'read-files.ts' : 'loader.ts')
  const { loadConfigDir } = await import(configDirModule) as typeof ReadFilesModule
  // createGatewayLogging (the logger with its request-line writer) is newer than createGatewayLogger.
  const loggerModule = await import(join(root, 'src', 'gateway', 'observability', 'logger.ts')) as Pick<typeof LoggerModule, 'createGatewayLogger'> & Partial<typeof LoggerModule>
  const logging = loggerModule.createGatewayLogging?.({ level: 'info', fd: logFd })
  const logger = logging?.logger ?? loggerModule.createGatewayLogger({ level: 'info', fd: logFd })
  const limiter = redisUrl === undefined ? {} : { limiter: { settings: { redisUrl } } }
  const app = await buildGateway({ config: loadConfigDir(configDir), backendUrl, logger, ...(logging?.requestLine === undefined ? {} : { requestLine: logging.requestLine }), ...limiter })
  await app.ready()
  return app
}

interface BatchCpu { process: number, mainThread: number, redis: number }

/**
 * CPU µs per request over `count` injected requests, `concurrency` at a time: this process's, of it its main thread's
 * (the rest is V8's helper threads: the garbage collector's parallel and concurrent work), and its Redis's (0 without).
 */
async function batch (s: Subject, count: number, concurrency: number): Promise<BatchCpu> {
  let next = 0
  // The Zipf sequence is replayed from its start by every batch, as `npm run bench` replays it in
  // every run: after the warm-up batch every consumer of a batch has been seen (steady state).
  const token = (i: number): string => s.order === undefined ? s.tokens[i % s.tokens.length] ?? '' : s.tokens[s.order[i % s.order.length] ?? 0] ?? ''
  let bad = 0
  const worker = async (): Promise<void> => {
    while (next < count) {
      const i = next++
      const res = await s.app.inject({ method: 'GET', url: PATH, headers: { authorization: `Bearer ${token(i)}` } })
      if (res.statusCode !== 200) bad++
    }
  }
  const before = process.cpuUsage()
  const mainBefore = mainThreadCpuMicros(process.pid)
  const redisBefore = s.redis === undefined ? 0 : mainThreadCpuMicros(s.redis.pid)
  await Promise.all(Array.from({ length: concurrency }, worker))
  const used = process.cpuUsage(before)
  const mainUsed = mainThreadCpuMicros(process.pid) - mainBefore
  const redisUsed = s.redis === undefined ? 0 : mainThreadCpuMicros(s.redis.pid) - redisBefore
  if (bad > 0) throw new Error(`${s.name}: ${bad} answers were not 200`)
  return { process: (used.user + used.system) / count, mainThread: mainUsed / count, redis: redisUsed / count }
}

async function main (): Promise<void> {
  const rounds = intFromEnv('BENCH_ROUNDS', DEFAULT_ROUNDS)
  const size = intFromEnv('BENCH_BATCH', DEFAULT_BATCH)
  const concurrency = intFromEnv('BENCH_CONCURRENCY', DEFAULT_CONCURRENCY)
  const pinned = taskset() !== null && pinProcess(process.pid, '1')
  const work = mkdtempSync(join(tmpdir(), 'petstore-policy-'))
  try {
    const { url: backendUrl } = await startBackend(work)
    if (pinned) pinProcess(process.pid, '0')
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`${backendUrl}/v1/pets`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: `pet-${i}`, categoryId: 1 }) })
      await res.arrayBuffer()
    }
    const configDir = writeConfigWithKeys(DEFAULT_ZIPF_CONSUMERS, join(work, 'config'))
    unboundPlans(configDir)
    const logFd = openSync('/dev/null', 'w')
    const hot = ['bench-key-0']
    const keys = Array.from({ length: 1_000 }, (_, i) => `bench-key-${i}`)
    const consumers = Array.from({ length: DEFAULT_ZIPF_CONSUMERS }, (_, i) => `bench-key-${i}`)
    const zipf = zipfSequence({ consumers: DEFAULT_ZIPF_CONSUMERS, exponent: DEFAULT_ZIPF_EXPONENT, length: DEFAULT_ZIPF_SEQUENCE_LENGTH, seed: DEFAULT_ZIPF_SEED })
    const bareApp = await bare(backendUrl)
    const gw = await gateway(REPO_ROOT, backendUrl, configDir, logFd)
    const redis = process.env.BENCH_REDIS === '0' ? undefined : await startScratchRedis('policy-cost').catch((err: unknown) => { process.stderr.write(`no Redis subjects: ${String(err)}\n`); return undefined })
    const gwRedis = redis === undefined ? undefined : await gateway(REPO_ROOT, backendUrl, configDir, logFd, `redis://127.0.0.1:${redis.port}`)
    const baselineDir = process.env.BENCH_BASELINE
    const baseline = baselineDir === undefined || baselineDir === '' ? undefined : await gateway(baselineDir, backendUrl, configDir, logFd)
    const all: Subject[] = [
      { name: 'bare @fastify/http-proxy', app: bareApp, tokens: hot },
      { name: 'gateway, hot key', app: gw, tokens: hot },
      { name: 'gateway, 1,000 keys', app: gw, tokens: keys },
      { name: 'gateway, zipf 10,000', app: gw, tokens: consumers, order: zipf },
      ...(gwRedis === undefined || redis === undefined
        ? []
        : [{ name: 'gateway on Redis, hot key', app: gwRedis, tokens: hot, redis }, { name: 'gateway on Redis, 1,000 keys', app: gwRedis, tokens: keys, redis },
            { name: 'gateway on Redis, zipf 10,000', app: gwRedis, tokens: consumers, order: zipf, redis }]),
      ...(baseline === undefined
        ? []
        : [{ name: 'baseline gateway, hot key', app: baseline, tokens: hot }, { name: 'baseline gateway, 1,000 keys', app: baseline, tokens: keys },
            { name: 'baseline gateway, zipf 10,000', app: baseline, tokens: consumers, order: zipf }])
    ]
    const only = (process.env.BENCH_SUBJECTS ?? '').split(';').map((x) => x.trim()).filter((x) => x !== '')
    const subjects = only.length === 0 ? all : all.filter((s) => only.some((o) => s.name.includes(o)))
    for (const s of subjects) await batch(s, size, concurrency)
    const perRound = new Map<string, BatchCpu[]>(subjects.map((s) => [s.name, []]))
    const last = (s: Subject): BatchCpu | undefined => perRound.get(s.name)?.at(-1)
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? subjects : [...subjects].reverse()
      for (const s of order) perRound.get(s.name)?.push(await batch(s, size, concurrency))
      process.stdout.write(`round ${round + 1}/${rounds}: ${subjects.map((s) => `${s.name} ${(last(s)?.process ?? NaN).toFixed(1)} (main ${(last(s)?.mainThread ?? NaN).toFixed(1)})`).join(' · ')} µs/req\n`)
    }
    const tenths = (value: number): number => Math.round(value * 10) / 10
    const bareRounds = (perRound.get(subjects[0]?.name ?? '') ?? []).map((used) => used.process)
    const rows = subjects.map((s) => {
      const used = perRound.get(s.name) ?? []
      const xs = used.map((u) => u.process)
      return {
        name: s.name,
        cpuUsPerRequest: tenths(median(xs)),
        mainThreadUsPerRequest: tenths(median(used.map((u) => u.mainThread))),
        overBareUs: tenths(median(xs.map((x, i) => x - (bareRounds[i] ?? NaN)))),
        redisUsPerRequest: s.redis === undefined ? undefined : tenths(median(used.map((u) => u.redis))),
        rounds: xs.map(tenths)
      }
    })
    const report = { date: new Date().toISOString(), rounds, batch: size, concurrency, pinned, baseline: baselineDir ?? null, rows }
    mkdirSync(join(REPO_ROOT, 'bench', 'results'), { recursive: true })
    writeFileSync(join(REPO_ROOT, 'bench', 'results', only.length === 0 ? 'policy-cost.json' : 'policy-cost-subset.json'), `${JSON.stringify({ ...report, subjects: only }, null, 2)}\n`)
    process.stdout.write(['', '| configuration | CPU µs per request (median) | of it the main thread | above bare proxy (median of per-round differences) | Redis CPU µs per request (median) |', '|---|---:|---:|---:|---:|',
      ...rows.map((r) => `| ${r.name} | ${r.cpuUsPerRequest} | ${r.mainThreadUsPerRequest} | ${r.overBareUs} | ${r.redisUsPerRequest ?? '—'} |`), ''].join('\n'))
    await Promise.all([bareApp.close(), gw.close(), gwRedis?.close(), baseline?.close()])
    await redis?.stop()
  } finally {
    await stopAll()
    rmSync(work, { recursive: true, force: true })
  }
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) await main()
