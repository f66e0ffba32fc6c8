// The config/ the repository ships is what `npm start` runs with and what the README's demo-key table
// describes. Tests run against test/fixtures/config instead; this file is the one place that reads
// the shipped files: they load with the gateway's own loader, and every demo key in the README's
// table authenticates with the id and as the plan the table names (and nothing else is configured).
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { loadConfigDir } from '../../src/gateway/config/read-files.js'
import { DEMO_KEYS, SHIPPED_CONFIG_DIR } from '../helpers/gateway.js'

const README = readFileSync(join(SHIPPED_CONFIG_DIR, '..', 'README.md'), 'utf8')

/** Rows of the README's demo-key table: `| plan (limits…) | \`id\` | \`psk_…\` |`. */
function readmeDemoKeys (): Array<{ plan: string, id: string, key: string }> {
  return [...README.matchAll(/^\| ([a-z]+) \([^)]*\) \| `([A-Za-z0-9._-]+)` \| `(psk_[A-Za-z0-9_]+)` \|$/gm)]
    .map((m) => ({ plan: m[1] as string, id: m[2] as string, key: m[3] as string }))
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
  for (const { plan, id, key } of rows) {
    const record = snapshot.keysByDigest.get(createHash('sha256').update(key).digest('hex'))
    t.ok(record, `${key} is configured`)
    t.equal(record?.plan, plan, `${key} is on ${plan}`)
    t.equal(record?.id, id, `${key}'s id is ${id} (what keys show and bans lift take)`)
  }
  t.same(rows.map((r) => r.key).sort(), Object.values(DEMO_KEYS).sort(), "the tests' DEMO_KEYS are the README's keys")
})
