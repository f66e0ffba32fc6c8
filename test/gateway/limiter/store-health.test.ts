// The store's readiness report: description, state from a real probe, and the eviction warning.
import t from 'tap'
import { evictionWarning, plainHealth, storeReport } from '../../../src/gateway/limiter/store-health.js'
import { createMemoryStore } from '../../../src/gateway/limiter/stores/memory.js'

t.test('maxmemory-policy: allkeys-* can evict keys without a TTL; noeviction and volatile-* cannot', async (t) => {
  for (const policy of ['allkeys-lru', 'allkeys-lfu', 'allkeys-random']) t.match(evictionWarning(policy), new RegExp(`${policy}.*noeviction or volatile-\\*`))
  for (const policy of ['noeviction', 'volatile-lru', 'volatile-ttl', undefined]) t.equal(evictionWarning(policy), undefined, String(policy))
})

t.test('the in-process store reports ok with no nodes; a failing probe is down', async (t) => {
  const store = createMemoryStore()
  const health = plainHealth(store)
  t.same(await storeReport(store, health, undefined), { kind: 'memory', nodes: [], state: 'ok' })
  t.same([health.errors(), health.fallbackActive(), await health.maxmemoryPolicy()], [0, false, undefined])
  t.same(await storeReport(store, { ...health, probe: async () => 'fallback' }, 'w'), { kind: 'memory', nodes: [], state: 'fallback', warning: 'w' })
  await t.rejects(storeReport(store, { ...health, probe: async () => { throw new Error('down: no answer') } }, undefined), /down/)
  await t.rejects(storeReport(store, plainHealth({ ...store, ping: async () => { throw new Error('no answer') } }), undefined), /no answer/, 'a plain store is down when its ping fails')
})
