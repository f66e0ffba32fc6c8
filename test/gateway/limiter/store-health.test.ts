// The store's readiness report: description, state from a real probe, and the eviction warning.
import t from 'tap'
import { evictionWarning } from '../../../src/gateway/limiter/store-health.js'
import { createMemoryStore } from '../../../src/gateway/limiter/memory/store.js'
import { startGateway } from '../../helpers/gateway.js'

t.test('maxmemory-policy: allkeys-* can evict keys without a TTL; noeviction and volatile-* cannot', async (t) => {
  for (const policy of ['allkeys-lru', 'allkeys-lfu', 'allkeys-random']) t.match(evictionWarning(policy), new RegExp(`${policy}.*noeviction or volatile-\\*`))
  for (const policy of ['noeviction', 'volatile-lru', 'volatile-ttl', undefined]) t.equal(evictionWarning(policy), undefined, String(policy))
})

t.test('the in-process store is ready with no nodes, never failing', async (t) => {
  const health = createMemoryStore().health
  t.same([health.errors(), health.fallbackActive(), await health.maxmemoryPolicy(), await health.probe()], [0, false, undefined, 'ok'])
  const gw = await startGateway(t)
  const ready = await (await fetch(`${gw.adminUrl}/readyz`)).json() as { checks: Record<string, unknown> }
  t.same(ready.checks.store, { ok: true, kind: 'memory', nodes: [], state: 'ok' })
})
