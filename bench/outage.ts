// `node --import tsx bench/outage.ts [baseline-dir]`: what each STORE_ON_ERROR policy keeps of a
// 600/min limit through Redis faults — the attack scenarios of test/helpers/attack.ts (two gateway
// processes on one Redis, ~300 requests/s with a burst on every second boundary, SIGSTOP pauses,
// a kill and restart without persistence, a ban then recovery, the sliding steady state), each
// run once per policy; with a baseline checkout (`git archive` of an older commit, node_modules
// linked in) its gateway runs the `local` rows too, for a before/after table. Writes
// bench/results/outage.json and outage.md, and prints the table (docs/limiter-internals.md quotes it).
// Env: OUTAGE_POLICIES [local,open,closed] OUTAGE_SCENARIOS [all, comma-separated names].
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Test } from 'tap'
import { ADMITTED, attack, SCENARIOS, type AttackOptions } from '../test/helpers/attack.js'
import type { StoreOnError } from '../src/gateway/limiter/redis/outage.js'
import { REPO_ROOT } from './lib/processes.js'

interface Row {
  scenario: string
  checkout: string
  policy: StoreOnError
  most: number
  admitted: number
  refused429: number
  refused503: number
  faults: string
  storeErrors: number[]
}

async function runOnce (scenario: string, options: AttackOptions, policy: StoreOnError, checkout: string, root: string): Promise<Row> {
  const teardowns: Array<() => unknown> = []
  const scope: Pick<Test, 'teardown'> = { teardown: (fn: () => unknown) => { teardowns.push(fn) } }
  try {
    const run = await attack(scope, { ...options, storeOnError: policy, root })
    return {
      scenario,
      checkout,
      policy,
      most: run.most,
      admitted: run.answers.filter((a) => ADMITTED(a.status)).length,
      refused429: run.statuses[429] ?? 0,
      refused503: run.statuses[503] ?? 0,
      faults: run.faults.map((f) => `${f.kind} ${f.ms.toFixed(0)} ms`).join(', '),
      storeErrors: run.storeErrors
    }
  } finally {
    for (const fn of teardowns.reverse()) await fn()
  }
}

async function main (): Promise<void> {
  const policies = (process.env.OUTAGE_POLICIES ?? 'local,open,closed').split(',') as StoreOnError[]
  const names = process.env.OUTAGE_SCENARIOS?.split(',') ?? Object.keys(SCENARIOS)
  const baseline = process.argv[2]
  const rows: Row[] = []
  for (const name of names) {
    const options = SCENARIOS[name as keyof typeof SCENARIOS] as AttackOptions | undefined
    if (options === undefined) throw new Error(`no scenario "${name}"`)
    if (baseline !== undefined) rows.push(await runOnce(name, options, 'local', 'baseline', baseline))
    for (const policy of policies) rows.push(await runOnce(name, options, policy, 'this', REPO_ROOT))
    process.stdout.write(`${JSON.stringify(rows.filter((r) => r.scenario === name))}\n`)
  }
  writeFileSync(join(REPO_ROOT, 'bench', 'results', 'outage.json'), JSON.stringify({ date: new Date().toISOString(), rows }, null, 2) + '\n')
  const table = ['| scenario | checkout | STORE_ON_ERROR | most admitted in a rolling minute (limit 600) | 429 | 503 | store errors per gateway | faults as they happened |', '|---|---|---|---:|---:|---:|---|---|',
    ...rows.map((r) => `| ${r.scenario} | ${r.checkout} | ${r.policy} | ${r.most} | ${r.refused429} | ${r.refused503} | ${r.storeErrors.join(' / ')} | ${r.faults} |`)]
  const head = `# Outage — what each STORE_ON_ERROR policy keeps of a 600/min limit\n\n${new Date().toISOString()} · two gateway processes on one Redis, ~300 requests/s with a burst on every second boundary (test/helpers/attack.ts); one run per row${baseline === undefined ? '' : `; "baseline": the gateway of ${baseline}`}.\n\n`
  writeFileSync(join(REPO_ROOT, 'bench', 'results', 'outage.md'), head + table.join('\n') + '\n')
  process.stdout.write(`\n${table.join('\n')}\n`)
}

await main()
