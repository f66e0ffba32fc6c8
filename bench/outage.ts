// `node --import ./src/ts-resolve.ts bench/outage.ts [baseline-dir]`: what each STORE_ON_ERROR policy keeps of a
// 600/min limit through Redis faults — the attack scenarios of test/helpers/attack.ts (two gateway
// processes on one Redis, ~300 requests/s with a burst on every second boundary, SIGSTOP pauses,
// a kill and restart without persistence, a ban then recovery, the sliding steady state), each
// run once per policy; with a baseline checkout (`git archive` of an older commit, node_modules
// linked in) its gateway runs the `local` rows too, for a before/after table. Writes
// bench/results/outage.json and outage.md, and prints the table (docs/limiter-internals.md quotes it).
// Env: OUTAGE_POLICIES [local,open,closed] OUTAGE_SCENARIOS [all, comma-separated names].
// OUTAGE_TAIL=1 runs the long tail instead (test/helpers/outage-tail.ts: 2,000 consumers by Zipf at
// 150 requests/s, a 5 s SIGSTOP and a 10 s kill with an empty restart, per policy of OUTAGE_POLICIES
// [local,strict]; OUTAGE_TAIL_FREEZE_MS adds a longer freeze, e.g. 60000) into bench/results/outage-tail.md, with
// each request refused in the traffic after an outage (rank, gateway, when, status, code and message).
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Test } from 'tap'
import { ADMITTED, attack, SCENARIOS, type AttackOptions } from '../test/helpers/attack.js'
import { describePhases, describeRefusals, outageTail, type Phase } from '../test/helpers/outage-tail.js'
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

/** The long tail through outages, per policy: the share answered 2xx in each phase. */
async function tail (): Promise<void> {
  const policies = (process.env.OUTAGE_POLICIES ?? 'local,strict').split(',') as StoreOnError[]
  const freeze = Number(process.env.OUTAGE_TAIL_FREEZE_MS ?? 0)
  const phases: Phase[] = [
    { kind: 'traffic', name: 'before', ms: 4_000 },
    { kind: 'freeze', name: 'frozen 5 s', ms: 5_000 },
    { kind: 'traffic', name: 'thawed', ms: 3_000 },
    { kind: 'kill', name: 'killed 10 s, restarted empty', ms: 10_000 },
    { kind: 'traffic', name: 'recovering', ms: 3_000 },
    { kind: 'traffic', name: 'after recovery', ms: 4_000 },
    ...(freeze > 0 ? [{ kind: 'freeze', name: `frozen ${freeze / 1000} s`, ms: freeze } as const, { kind: 'traffic', name: 'after the long freeze', ms: 4_000 } as const] : [])
  ]
  const lines = ['| STORE_ON_ERROR | ' + phases.map((p) => p.name).join(' | ') + ' | outage admissions |', '|---|' + phases.map(() => '---:|').join('') + '---|']
  // Each refusal in a traffic phase after the first (Redis answering again): rank, gateway, when, status, code, message.
  const refusals: string[] = []
  for (const policy of policies) {
    const teardowns: Array<() => unknown> = []
    try {
      const run = await outageTail({ teardown: (fn: () => unknown) => { teardowns.push(fn) } }, { consumers: 2_000, rate: 150, perMinute: 3_000, phases, env: { STORE_ON_ERROR: policy } })
      process.stdout.write(`${policy}: ${describePhases(run)}\n`)
      lines.push(`| ${policy} | ` + run.phases.map((p) => `${(100 * p.ok / Math.max(1, p.requests)).toFixed(1)} % of ${p.requests}`).join(' | ') + ` | ${run.outageAdmissions.reserve} reserve, ${run.outageAdmissions.allowance} allowance |`)
      for (const phase of phases.slice(1)) if (phase.kind === 'traffic') refusals.push(...describeRefusals(run, phase.name, 10).map((line) => `- ${policy}, ${line}`))
    } finally {
      for (const fn of teardowns.reverse()) await fn()
    }
  }
  const head = `# Outage — the long tail\n\n${new Date().toISOString()} · two gateway processes on one Redis (STORE_PROCESSES=2), 2,000 consumers by Zipf (s = 1.1) at 150 requests/s, 3,000/min each (test/helpers/outage-tail.ts); answered 2xx per phase, one run per row.\n\n`
  const refused = `\n## Refused in the traffic after an outage\n\nConsumer rank by Zipf (0: the busiest), gateway, ms after the phase began (Redis answering again from its start), what it was told (at most 10 a phase and policy).\n\n${refusals.length === 0 ? 'None.' : refusals.join('\n')}\n`
  writeFileSync(join(REPO_ROOT, 'bench', 'results', 'outage-tail.md'), head + lines.join('\n') + '\n' + refused)
  process.stdout.write(`\n${lines.join('\n')}\n${refused}`)
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

await (process.env.OUTAGE_TAIL === '1' ? tail() : main())
