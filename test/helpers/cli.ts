// Runs the command line two ways: as a real child process (`src/cli/main.ts` on Node's type stripping,
// as `npm run cli` runs it through tsx) and in-process through its exported `run` (same code, no ~2 s process start,
// for the many refusal cases).
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { run } from '../../src/cli/main.js'
import { CHILD_ENV, REPO_ROOT, TS_NODE_ARGS } from './processes.js'

const exec = promisify(execFile)

export interface CliResult { code: number, stdout: string, stderr: string }

export interface CliOptions { env?: Record<string, string>, input?: string }

export async function cli (args: string[], opts: CliOptions = {}): Promise<CliResult> {
  const child = exec(process.execPath, [...TS_NODE_ARGS, join(REPO_ROOT, 'src/cli/main.ts'), ...args], {
    cwd: REPO_ROOT, env: { ...process.env, ...CHILD_ENV, ...opts.env }
  })
  if (opts.input !== undefined) { child.child.stdin?.end(opts.input) } else { child.child.stdin?.end() }
  try {
    const { stdout, stderr } = await child
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code: number, stdout: string, stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

/** `run(args)` in this process with `env` applied for the call; output collected as the child's would be. */
export async function cliInProcess (args: string[], env: Record<string, string | undefined> = {}): Promise<CliResult> {
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]))
  const apply = (values: Record<string, string | undefined>): void => {
    for (const [k, v] of Object.entries(values)) {
      if (v === undefined) Reflect.deleteProperty(process.env, k)
      else process.env[k] = v
    }
  }
  let stdout = ''
  let stderr = ''
  apply(env)
  try {
    const code = await run(args, (line) => { stdout += `${line}\n` }, (line) => { stderr += `${line}\n` })
    return { code, stdout, stderr }
  } finally {
    apply(saved)
  }
}
