// Runs the project's entry points as real child processes (as a deployment does), collecting their
// output and stopping them in teardown.
import { spawn, type ChildProcess } from 'node:child_process'
import { join } from 'node:path'
import type { Test } from 'tap'

export const REPO_ROOT = join(import.meta.dirname, '..', '..')

/**
 * Environment for entry points run as child processes. They load TypeScript through tsx, whose
 * transform differs from tap's: merged with tap's coverage of the same files it garbles the
 * report (those files drop out of it), so the children collect none.
 */
export const CHILD_ENV: Readonly<Record<string, string>> = { _TAPJS_PROCESSINFO_COVERAGE_: '0' }

export interface RunningProcess {
  child: ChildProcess
  output: () => string
  exited: Promise<{ code: number | null, signal: NodeJS.Signals | null }>
}

export function runEntry (t: Test, entry: string, env: Record<string, string>): RunningProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', join(REPO_ROOT, entry)], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...CHILD_ENV, LOG_LEVEL: 'info', ...env },
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
