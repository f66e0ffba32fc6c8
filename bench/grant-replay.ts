// What grant.lua costs redis-server on real traffic, without the gateway process's timing in the way: grant calls a
// zipf-calls run recorded (ZIPF_CALLS_RECORD of bench/zipf-calls.ts, each checkout's own store recording its own calls:
// the ARGV layout differs between checkouts) sent again to a fresh redis-server with that checkout's script, at their
// recorded spacing (calls of one recorded millisecond together), so the script's paths (a bucket's slide, a reserve's
// renewal) come as often as they did. Measured per call and per entry: the script's own time (INFO commandstats,
// cmdstat_evalsha usec: wall time inside Redis) and redis-server's CPU (INFO cpu, user + system: the script, the
// socket, the event loop), and the commands the scripts ran. Variants alternate by round (order reversed every other
// round); the table is the medians.
//   node --import ./src/ts-resolve.ts bench/grant-replay.ts CHECKOUT=CALLS.json [CHECKOUT=CALLS.json …]
//   GRANT_REPLAY_ROUNDS (default 7). CHECKOUT is the root whose src/gateway/limiter/lua/grant.lua runs.
import { execFile, spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { taskset } from './lib/proc-cpu.js'

const run = promisify(execFile)

interface RecordedCall { at: number, keys: string[], args: string[] }
interface ReplayResult { calls: number, entries: number, scriptMicros: number, redisCpuMicros: number, commands: Record<string, number> }

async function startRedis (): Promise<{ port: number, stop: () => Promise<void> }> {
  const port = 21_000 + Math.floor(Math.random() * 20_000)
  const dir = mkdtempSync(join(tmpdir(), 'grant-replay-redis-'))
  const bin = taskset()
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no']
  const server = bin === null ? spawn('redis-server', args, { cwd: dir, stdio: 'ignore' }) : spawn(bin, ['-c', '1', 'redis-server', ...args], { cwd: dir, stdio: 'ignore' })
  for (let attempt = 0; attempt < 100; attempt++) {
    try {
      if ((await run('redis-cli', ['-p', String(port), 'PING'])).stdout.trim() === 'PONG') break
    } catch { /* not listening yet */ }
    await new Promise((done) => setTimeout(done, 50))
  }
  return {
    port,
    stop: async () => {
      await new Promise<void>((done) => { server.once('exit', () => { done() }); server.kill('SIGTERM') })
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

async function redisCpuMicros (client: Redis): Promise<number> {
  const info = await client.info('cpu')
  const seconds = (name: string): number => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)?.[1] ?? Number.NaN)
  return Math.round((seconds('used_cpu_user') + seconds('used_cpu_sys')) * 1e6)
}

async function commandStats (client: Redis): Promise<{ calls: Record<string, number>, usec: Record<string, number> }> {
  const info = await client.info('commandstats')
  const calls: Record<string, number> = {}
  const usec: Record<string, number> = {}
  for (const match of info.matchAll(/cmdstat_(\w+):calls=(\d+),usec=(\d+)/g)) { calls[match[1]!] = Number(match[2]); usec[match[1]!] = Number(match[3]) }
  return { calls, usec }
}

/** Replays `calls` with `lua` on a fresh redis-server. */
async function replay (lua: string, calls: readonly RecordedCall[]): Promise<ReplayResult> {
  const redis = await startRedis()
  const client = new Redis({ port: redis.port, host: '127.0.0.1' })
  try {
    const sha = createHash('sha1').update(lua).digest('hex')
    await client.script('LOAD', lua)
    await client.set('rl:{#epoch}', 'deployed,0')
    await client.config('RESETSTAT')
    const cpuBefore = await redisCpuMicros(client)
    const started = performance.now()
    const first = calls[0]?.at ?? 0
    let entries = 0
    const pending: Array<Promise<unknown>> = []
    for (let index = 0; index < calls.length;) {
      const at = calls[index]!.at
      const wait = started + (at - first) - performance.now()
      if (wait > 0) await new Promise((done) => setTimeout(done, wait))
      for (; index < calls.length && calls[index]!.at === at; index++) {
        const call = calls[index]!
        entries += call.keys.length / 2
        pending.push(client.evalsha(sha, call.keys.length, ...call.keys, ...call.args))
      }
    }
    await Promise.all(pending)
    const redisCpu = await redisCpuMicros(client) - cpuBefore
    const stats = await commandStats(client)
    return { calls: calls.length, entries, scriptMicros: stats.usec.evalsha ?? 0, redisCpuMicros: redisCpu, commands: stats.calls }
  } finally {
    client.disconnect()
    await redis.stop()
  }
}

function median (values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

async function main (): Promise<void> {
  const rounds = Number(process.env.GRANT_REPLAY_ROUNDS ?? 7)
  const variants = process.argv.slice(2).map((pair) => {
    const [root, file] = pair.split('=') as [string, string]
    return { name: pair, lua: readFileSync(join(root, 'src/gateway/limiter/lua/grant.lua'), 'utf8'), calls: JSON.parse(readFileSync(file, 'utf8')) as RecordedCall[] }
  })
  const results = new Map<string, ReplayResult[]>(variants.map((variant) => [variant.name, []]))
  for (let round = 0; round < rounds; round++) {
    for (const variant of round % 2 === 0 ? variants : [...variants].reverse()) {
      const result = await replay(variant.lua, variant.calls)
      results.get(variant.name)!.push(result)
      process.stderr.write(`round ${round + 1} ${variant.name}: ${JSON.stringify(result)}\n`)
    }
  }
  console.log(`grant calls replayed at their recorded spacing, ${rounds} interleaved rounds; medians`)
  console.log('| checkout=calls | calls | entries | script µs per call | script µs per entry | Redis CPU µs per call | Redis CPU µs per entry | commands per entry (script\'s) |')
  console.log('|---|---:|---:|---:|---:|---:|---:|---|')
  for (const [name, list] of results) {
    const { calls, entries, commands } = list[0]!
    const inner = Object.entries(commands).filter(([command]) => !['evalsha', 'info', 'config', 'set', 'script', 'ping'].includes(command)).map(([command, count]) => `${command} ${(count / entries).toFixed(3)}`).join(', ')
    console.log(`| ${name} | ${calls} | ${entries} | ${median(list.map((result) => result.scriptMicros / calls)).toFixed(2)} | ${median(list.map((result) => result.scriptMicros / entries)).toFixed(2)} | ${median(list.map((result) => result.redisCpuMicros / calls)).toFixed(2)} | ${median(list.map((result) => result.redisCpuMicros / entries)).toFixed(2)} | ${inner} |`)
  }
}

await main()
