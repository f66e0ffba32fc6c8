// Accuracy bench: the accuracy replay (test/helpers/accuracy-replay.ts) at full length, as a table:
// our in-process store and Redis script, a fixed window and the two-counter estimate, against an
// exact per-request log. Run: npm run bench:accuracy
import { DAY_LIMIT, MINUTE_LIMIT, runAccuracy, type Row } from '../test/helpers/accuracy-replay.js'

function table (rows: Row[]): string {
  const header = ['pattern', 'model', 'offered', 'admitted', 'over-admission (max excess in a rolling window)', 'under-admission %']
  const lines = rows.map((r) => [r.pattern, r.model, String(r.offered), String(r.admitted), String(r.over), r.underPct.toFixed(2)])
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)))
  const fmt = (cells: string[]): string => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`
  return [fmt(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...lines.map(fmt)].join('\n')
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const rows = await runAccuracy()
  console.log(`Limits: ${MINUTE_LIMIT}/min (1 s buckets), ${DAY_LIMIT}/day (15 min buckets)\n`)
  console.log(table(rows))
  const ours = rows.filter((r) => r.model.startsWith('ours'))
  const bad = ours.filter((r) => r.over > 0 || (r.pattern.startsWith('steady at the') && r.underPct > 2))
  if (bad.length > 0) {
    console.error(`\nFAIL: ${bad.map((r) => r.pattern).join(', ')}`)
    process.exitCode = 1
  }
}
