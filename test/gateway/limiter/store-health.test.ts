// The store's readiness report: description, state from a real probe, and the eviction warning.
import t from 'tap'
import { evictionWarning, storeReport } from '../../../src/gateway/limiter/store-health.js'
import { createMemoryStore } from '../../../src/gateway/limiter/memory/store.js'

t.test('maxmemory-policy: allkeys-* can evict keys without a TTL; noeviction and volatile-* cannot', async (t) => {
  for (const policy of ['allkeys-lru', 'allkeys-lfu', 'allkeys-random']) t.match(evictionWarning(policy), new RegExp(`${policy}.*noeviction or volatile-\\*`))
  for (const policy of ['noeviction', 'volatile-lru', 'volatile-ttl', undefined]) t.equal(evictionWarning(policy), undefined, String(policy))
})

t.test('the in-process store reports ok with no nodes; a failing probe is down', async (t) => {
  const store = createMemoryStore()
  const health = store.health
  t.same(await storeReport(store.describe(), health, undefined), { kind: 'memory', nodes: [], state: 'ok' })
  t.same([health.errors(), health.fallbackActive(), await health.maxmemoryPolicy()], [0, false, undefined])
  t.same(await storeReport(store.describe(), { ...health, probe: async () => 'fallback' }, 'w'), { kind: 'memory', nodes: [], state: 'fallback', warning: 'w' })
  await t.rejects(storeReport(store.describe(), { ...health, probe: async () => { throw new Error('down: no answer') } }, undefined), /down/)
})
