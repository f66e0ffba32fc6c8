// What every bench script does around its measurements: integer settings from the environment,
// progress lines on stdout, and the result files (a .md to read, a .json to compare) in bench/results.
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { REPO_ROOT } from './processes.js'

export const RESULTS_DIR = join(REPO_ROOT, 'bench', 'results')

export function intFromEnv (name: string, fallback: number): number {
  const raw = process.env[name]
  return raw === undefined || raw === '' ? fallback : Number.parseInt(raw, 10)
}

export const log = (line: string): void => { process.stdout.write(`${line}\n`) }
export const round1 = (x: number): number => Math.round(x * 10) / 10

/** bench/results/<name>.md (and <name>.json when a report is given), and the markdown on stdout. */
export function writeResults (name: string, md: string[], report?: unknown): void {
  mkdirSync(RESULTS_DIR, { recursive: true })
  writeFileSync(join(RESULTS_DIR, `${name}.md`), md.join('\n'))
  if (report !== undefined) writeFileSync(join(RESULTS_DIR, `${name}.json`), `${JSON.stringify(report, null, 2)}\n`)
  log(md.join('\n'))
}
