// `npm start`: runs the backend and the gateway as two child processes of one launcher — the way
// a deployment runs them apart, on one machine. Ctrl-C / SIGTERM stops both; if either dies, the
// other is stopped and the launcher exits non-zero.
import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { dirname, join } from 'node:path'

const here = dirname(fileURLToPath(import.meta.url))
const fromSource = import.meta.url.endsWith('.ts')
const ext = fromSource ? '.ts' : '.js'
const nodeArgs = fromSource ? ['--import', 'tsx'] : []

function run (name: string, file: string): ChildProcess {
  const child = spawn(process.execPath, [...nodeArgs, join(here, '..', file + ext)], { stdio: 'inherit', env: process.env })
  child.on('exit', (code, signal) => {
    if (!stopping) {
      console.error(`${name} exited (${signal ?? code}); stopping`)
      stop('SIGTERM', 1)
    }
  })
  return child
}

let stopping = false
const children: ChildProcess[] = []

function stop (signal: NodeJS.Signals, exitCode: number): void {
  if (stopping) return
  stopping = true
  process.exitCode = exitCode
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal)
  }
}

children.push(run('backend', 'backend/server'), run('gateway', 'gateway/server'))
process.on('SIGINT', () => stop('SIGTERM', 0))
process.on('SIGTERM', () => stop('SIGTERM', 0))
