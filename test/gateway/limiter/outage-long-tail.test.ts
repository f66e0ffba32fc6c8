// The long tail through real Redis outages with the shipped defaults (STORE_ON_ERROR=local): two real
// gateway processes on one real redis-server, 2,000 consumers drawn by Zipf (s = 1.1) at about 150
// requests/s, every one far below its limits (3,000/min; the busiest near half of it). Busy consumers
// are answered from their reserves, the rest from the outage allowance: ≥ 99 % answered 2xx while
// Redis is frozen for 5 s (SIGSTOP) and while it is killed and restarted empty after 10 s, and every
// request once it has recovered. Under STORE_ON_ERROR=strict (the reserve only) the same freeze
// answered 40.8 % (docs/limiter-internals.md). Counts, not timings: a late timer sends what it owes.
import t from 'tap'
import { describePhases, outageTail } from '../../helpers/outage-tail.js'

t.test('2,000 consumers by Zipf through a 5 s freeze and a 10 s kill with an empty restart', async (t) => {
  const run = await outageTail(t, {
    consumers: 2_000,
    rate: 150,
    perMinute: 3_000,
    phases: [
      { kind: 'traffic', name: 'before', ms: 4_000 },
      { kind: 'freeze', name: 'frozen 5 s', ms: 5_000 },
      { kind: 'traffic', name: 'thawed', ms: 3_000 },
      { kind: 'kill', name: 'killed 10 s', ms: 10_000 },
      { kind: 'traffic', name: 'restarted empty', ms: 3_000 },
      { kind: 'traffic', name: 'after recovery', ms: 4_000 }
    ]
  })
  t.comment(describePhases(run))
  const share = (name: string): number => { const p = run.phases.find((x) => x.name === name)!; return p.ok / p.requests }
  t.equal(share('before'), 1, 'every request answered 2xx before the outage')
  t.ok(share('frozen 5 s') >= 0.99, `≥ 99 % answered 2xx while Redis is frozen (${(100 * share('frozen 5 s')).toFixed(2)} %)`)
  t.ok(share('killed 10 s') >= 0.99, `≥ 99 % answered 2xx while Redis is killed (${(100 * share('killed 10 s')).toFixed(2)} %)`)
  t.ok(share('restarted empty') >= 0.99, `≥ 99 % answered 2xx while it recovers (${(100 * share('restarted empty')).toFixed(2)} %)`)
  t.equal(share('after recovery'), 1, 'every request answered 2xx after recovery')
  t.ok(run.outageAdmissions.allowance > 0 && run.outageAdmissions.reserve > 0, `outage admissions by kind counted in gateway_store_outage_admissions_total (${JSON.stringify(run.outageAdmissions)})`)
})
