// The README's curl tour says what a POST answers (`# 201 + Location: …`); that must hold on every
// run of the stack, not only the first: pets persist and ids increase, so the second run's pet is
// not /v1/pets/1 (issue 33, row 12: the README promised `Location: /v1/pets/1`). The tour's own
// request, sent twice to a real gateway and backend, must match the comment both times (`<id>`
// standing for any id).
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { startGateway } from '../helpers/gateway.js'
import { bearer, DEMO_KEYS } from '../helpers/config-fixture.js'
import { REPO_ROOT } from '../helpers/processes.js'

const README = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8')

t.test('the README\'s POST comment holds on a first run and on every later one', async (t) => {
  const line = README.split('\n').find((l) => /# 201 \+ Location: /.test(l))
  t.ok(line, 'the tour says what the POST answers')
  const promised = /# 201 \+ Location: (\S+)/.exec(line ?? '')?.[1] ?? ''
  const body = /-d '(\{[^']*\})'/.exec(line ?? '')?.[1] ?? '{"name":"Rex","categoryId":1}'
  const pattern = new RegExp(`^${promised.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&').replace('<id>', '\\d+')}$`)
  const gw = await startGateway(t)
  for (const run of ['first run', 'second run (the first one\'s pet is still there)']) {
    const res = await fetch(`${gw.url}/v1/pets`, { method: 'POST', headers: { ...bearer(DEMO_KEYS.free), 'content-type': 'application/json' }, body })
    t.equal(res.status, 201, run)
    t.match(res.headers.get('location'), pattern, `${run}: Location ${String(res.headers.get('location'))} is what the README says (${promised})`)
    await res.arrayBuffer()
  }
})
