// The config/ the repository ships is what `npm start` runs with and what the README's demo-key table
// describes. Tests run against test/fixtures/config instead; this file is the one place that reads
// the shipped files: they load with the gateway's own loader, and every demo key in the README's
// table authenticates with the id and as the plan the table names (and nothing else is configured).
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { loadConfigDir } from '../../src/gateway/config/read-files.js'
import { DEMO_KEYS, SHIPPED_CONFIG_DIR } from '../helpers/config-fixture.js'

const README = readFileSync(join(SHIPPED_CONFIG_DIR, '..', 'README.md'), 'utf8')

/**
 * Rows of the README's demo-key table, read by its header (`| plan | per minute | per day | id | key |`):
 * a column added to the table (another window) leaves these readings as they are.
 */
function readmeDemoKeys (): Array<{ plan: string, id: string, key: string, perMinute: string, perDay: string }> {
  const lines = README.split('\n')
  const header = lines.findIndex((l) => /^\| plan \|/.test(l))
  const cells = (line: string): string[] => line.split('|').slice(1, -1).map((c) => c.trim())
  const names = cells(lines[header] ?? '')
  const column = (row: string[], name: string): string => (row[names.indexOf(name)] ?? '').replace(/^`|`$/g, '')
  const rows: string[][] = []
  for (let i = header + 2; header >= 0 && lines[i]?.startsWith('|') === true; i++) rows.push(cells(lines[i] ?? ''))
  return rows.map((row) => ({ plan: column(row, 'plan'), id: column(row, 'id'), key: column(row, 'key'), perMinute: column(row, 'per minute'), perDay: column(row, 'per day') }))
}

t.test('the shipped config/ loads with the gateway loader', async (t) => {
  const snapshot = loadConfigDir(SHIPPED_CONFIG_DIR)
  t.same([...snapshot.plans.keys()].sort(), ['business', 'enterprise', 'free', 'pro'])
  t.ok(snapshot.routes.length > 0, 'routes are configured')
})

t.test("the shipped demo keys are exactly the README's table, each with the id and on the plan it names", async (t) => {
  const rows = readmeDemoKeys()
  t.equal(rows.length, 4, 'the README lists one demo key per plan')
  const snapshot = loadConfigDir(SHIPPED_CONFIG_DIR)
  t.equal(snapshot.keysByDigest.size, rows.length, 'config/keys.yaml holds no key the README does not list')
  for (const { plan, id, key, perMinute, perDay } of rows) {
    const record = snapshot.keysByDigest.get(createHash('sha256').update(key).digest('hex'))
    t.ok(record, `${key} is configured`)
    t.equal(record?.plan, plan, `${key} is on ${plan}`)
    t.equal(record?.id, id, `${key}'s id is ${id} (what keys show and bans lift take)`)
    t.equal(perMinute, record?.limits.perMinute.toLocaleString('en-US'), `${id}: per minute as configured`)
    t.equal(perDay, record?.limits.perDay.toLocaleString('en-US'), `${id}: per day as configured`)
  }
  t.same(rows.map((r) => r.key).sort(), Object.values(DEMO_KEYS).sort(), "the tests' DEMO_KEYS are the README's keys")
})
