// The stores' accuracy on replayed traffic (test/helpers/accuracy-replay.ts runs the in-process
// store's consume and the Redis decide script itself, on a virtual clock): never over-admits on any
// pattern, under-admits at most 2 % at steady traffic exactly at the limit, and both stores admit the
// very same requests.
import t from 'tap'
import { runAccuracy } from '../../helpers/accuracy-replay.js'
import { longOr } from '../../helpers/long.js'

t.test('accuracy replay through the stores', async (t) => {
  // A tenth of the bench's replay (the Lua VM is slow; the same over, under and twin figures as a
  // quarter), the whole of it under TEST_LONG=1.
  const rows = await runAccuracy(longOr(0.1, 1))
  const ours = rows.filter((r) => r.model.startsWith('ours'))
  t.same([...new Set(ours.map((r) => r.model))], ['ours: in-process store', 'ours: Redis script'])
  for (const row of ours) {
    t.equal(row.over, 0, `${row.model}, ${row.pattern}: never over-admits`)
    if (row.pattern.startsWith('steady at the')) t.ok(row.underPct <= 2, `${row.model}, ${row.pattern}: under-admits ${row.underPct.toFixed(2)} % ≤ 2 %`)
  }
  for (const row of ours.filter((r) => r.model === 'ours: Redis script')) {
    const twin = ours.find((r) => r.model === 'ours: in-process store' && r.pattern === row.pattern)
    t.equal(row.admitted, twin?.admitted, `${row.pattern}: the script admits what the in-process store admits`)
  }
  const fixedEdges = rows.find((r) => r.model === 'fixed window' && r.pattern === 'bursts at minute edges')
  t.equal(fixedEdges?.over, 60, 'a fixed window admits twice the limit across an edge')
})
