// Runs the project's entry points as real child processes (as a deployment does), collecting their
// output and stopping them in teardown.
import { spawn, type ChildProcess } from 'node:child_process'
import { join } from 'node:path'
import type { Test } from 'tap'

export const REPO_ROOT = join(import.meta.dirname, '..', '..')

export interface RunningProcess {
  child: ChildProcess
  output: () => string
  exited: Promise<{ code: number | null, signal: NodeJS.Signals | null }>
}

export function runEntry (t: Test, entry: string, env: Record<string, string>): RunningProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', join(REPO_ROOT, entry)], {
    cwd: REPO_ROOT,
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let out = ''
  child.stdout?.on('data', (c: Buffer) => { out += c.toString() })
  child.stderr?.on('data', (c: Buffer) => { out += c.toString() })
  const exited = new Promise<{ code: number | null, signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }))
  })
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL')
      await exited
    }
  })
  return { child, output: () => out, exited }
}
