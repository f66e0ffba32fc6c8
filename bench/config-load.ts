// How long start-up and a reload take as keys.yaml grows (10, 10k, 100k keys): the config is read,
// parsed, validated and indexed on every start and every reload, so this is the part that scales
// with the key count. Start-up here = building the gateway (its first config load included) + listening.
//   npm run bench:config       writes bench/results/config-load.json
import { createHash } from 'node:crypto'
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildGateway } from '../src/gateway/app.js'

export const KEY_COUNTS = [10, 10_000, 100_000]
export const DEFAULT_RUNS = 5
const REPO_ROOT = join(import.meta.dirname, '..')
const PLANS = ['free', 'pro', 'business']

/** A config directory like the repository's, with `count` generated keys. */
export function writeConfigWithKeys (count: number, dir = mkdtempSync(join(tmpdir(), 'petstore-config-'))): string {
  cpSync(join(REPO_ROOT, 'config'), dir, { recursive: true })
  const lines = ['keys:']
  for (let i = 0; i < count; i++) {
    const digest = createHash('sha256').update(`bench-key-${i}`).digest('hex')
    lines.push(`  - { id: key-${i}, sha256: ${digest}, plan: ${PLANS[i % PLANS.length] ?? 'free'} }`)
  }
  writeFileSync(join(dir, 'keys.yaml'), lines.join('\n') + '\n')
  return dir
}

function median (values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? 0
}

async function measure (count: number, runs: number): Promise<{ keys: number, startupMs: number, reloadMs: number }> {
  const dir = writeConfigWithKeys(count)
  const startups: number[] = []
  const reloads: number[] = []
  try {
    for (let run = 0; run < runs; run++) {
      const started = performance.now()
      const app = await buildGateway({ backendUrl: 'http://127.0.0.1:9', logger: false, reload: { dir, watch: false } })
      await app.listen({ host: '127.0.0.1', port: 0 })
      startups.push(performance.now() - started)
      writeFileSync(join(dir, 'routes.yaml'), `# run ${run}\n` + 'routes: []\n')
      const reloadStarted = performance.now()
      const result = await app.configReloader.reload('bench')
      reloads.push(performance.now() - reloadStarted)
      if (!result.ok) throw new Error(result.problems.join('; '))
      await app.close()
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  return { keys: count, startupMs: median(startups), reloadMs: median(reloads) }
}

async function main (): Promise<void> {
  const runs = Number(process.env.BENCH_RUNS ?? DEFAULT_RUNS)
  const rows = []
  for (const count of KEY_COUNTS) rows.push(await measure(count, runs))
  console.log('| keys in keys.yaml | start-up (median ms) | reload (median ms) |')
  console.log('|---:|---:|---:|')
  for (const r of rows) console.log(`| ${r.keys.toLocaleString('en')} | ${r.startupMs.toFixed(0)} | ${r.reloadMs.toFixed(0)} |`)
  mkdirSync(join(REPO_ROOT, 'bench', 'results'), { recursive: true })
  writeFileSync(join(REPO_ROOT, 'bench', 'results', 'config-load.json'), JSON.stringify({ runs, rows }, null, 2) + '\n')
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) await main()
