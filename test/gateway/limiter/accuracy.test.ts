// Guards the accuracy bench's claims: our windows never over-admit on any pattern, and under-admit
// at most 2 % at steady traffic exactly at the limit; the fixed window does over-admit at edges.
import t from 'tap'
import { runAccuracy } from '../../../bench/accuracy.js'

t.test('accuracy bench', async (t) => {
  const rows = runAccuracy()
  for (const row of rows.filter((r) => r.model.startsWith('ours'))) {
    t.equal(row.over, 0, `${row.pattern}: never over-admits`)
    if (row.pattern.startsWith('steady at the')) t.ok(row.underPct <= 2, `${row.pattern}: under-admits ${row.underPct.toFixed(2)} % ≤ 2 %`)
  }
  const fixedEdges = rows.find((r) => r.model === 'fixed window' && r.pattern === 'bursts at minute edges')
  t.equal(fixedEdges?.over, 60, 'a fixed window admits twice the limit across an edge')
})
