// A throwaway redis-server for the benches that drive the store in-process (zipf-calls, zipf-calls-profile,
// grant-replay): no persistence, pinned to core 1 when taskset exists (the measured process runs on the other), on
// a random port in 21000–40999 — another is tried when the server does not answer, because the port was taken — in
// a temp dir removed when it stops.
import { execFile, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { taskset } from './proc-cpu.js'

const run = promisify(execFile)
const START_ATTEMPTS = 5

export interface ScratchRedis {
  port: number
  /** redis-server's own PID (taskset execs it: the same process), for /proc. */
  pid: number
  stop: () => Promise<void>
}

async function answers (port: number): Promise<boolean> {
  try {
    return (await run('redis-cli', ['-p', String(port), 'PING'])).stdout.trim() === 'PONG'
  } catch {
    return false
  }
}

/** One redis-server, `name` naming its temp dir; answering PING or not (the caller checks). */
async function startOnce (name: string): Promise<ScratchRedis> {
  const port = 21_000 + Math.floor(Math.random() * 20_000)
  const dir = mkdtempSync(join(tmpdir(), `${name}-redis-`))
  const bin = taskset()
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no']
  const server = bin === null ? spawn('redis-server', args, { cwd: dir, stdio: 'ignore' }) : spawn(bin, ['-c', '1', 'redis-server', ...args], { cwd: dir, stdio: 'ignore' })
  for (let attempt = 0; attempt < 100 && !await answers(port); attempt++) await new Promise((done) => setTimeout(done, 50))
  return {
    port,
    pid: server.pid!,
    stop: async () => {
      if (server.exitCode === null && server.signalCode === null) await new Promise<void>((done) => { server.once('exit', () => { done() }); server.kill('SIGTERM') })
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

/** A fresh redis-server that answers PING; throws after START_ATTEMPTS ports that did not. */
export async function startScratchRedis (name: string): Promise<ScratchRedis> {
  for (let attempt = 1; ; attempt++) {
    const redis = await startOnce(name)
    if (await answers(redis.port)) return redis
    await redis.stop()
    if (attempt >= START_ATTEMPTS) throw new Error('redis-server did not start')
  }
}
