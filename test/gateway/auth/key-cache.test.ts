// The token → key record cache of auth/key-cache.ts: a hit skips the digest, a reload (new snapshot)
// takes effect at once, misses are never cached, and the cache is bounded with second-chance eviction
// (src/shared/second-chance-map.ts): a key hit since it was placed outlives one that was not.
import t from 'tap'
import { createHash } from 'node:crypto'
import { createKeyLookup } from '../../../src/gateway/auth/key-cache.js'
import { DEMO_KEYS, testConfig } from '../../helpers/config-fixture.js'

const digest = (token: string): string => createHash('sha256').update(token).digest('hex')

t.test('a known token resolves to its record, from the cache the second time', async (t) => {
  const snapshot = testConfig()
  const lookup = createKeyLookup()
  const first = lookup(snapshot, DEMO_KEYS.pro)
  t.equal(first?.id, 'demo-pro')
  t.equal(lookup(snapshot, DEMO_KEYS.pro), first, 'the same record object')
  t.equal(lookup(snapshot, 'psk_not_a_key'), undefined)
})

t.test('a reload takes effect with the first lookup on the new snapshot', async (t) => {
  const lookup = createKeyLookup()
  const before = testConfig()
  t.equal(lookup(before, DEMO_KEYS.pro)?.disabled, false)
  const after = testConfig({ 'keys.yaml': `keys:\n  - { id: demo-pro, sha256: ${digest(DEMO_KEYS.pro)}, plan: free, disabled: true }\n` })
  const record = lookup(after, DEMO_KEYS.pro)
  t.equal(record?.disabled, true, 'disabled by the reload')
  t.equal(record?.plan, 'free', 're-planned by the reload')
  t.equal(lookup(after, DEMO_KEYS.free), undefined, 'removed by the reload')
  t.equal(lookup(before, DEMO_KEYS.free)?.id, 'demo-free', 'a request still on the old snapshot reads the old config')
})

t.test('misses are not cached, and the cache is bounded', async (t) => {
  const snapshot = testConfig()
  let digests = 0
  const counting = { ...snapshot, keysByDigest: new Proxy(snapshot.keysByDigest, {
    get (target, prop) {
      if (prop === 'get') return (k: string) => { digests++; return target.get(k) }
      const value = Reflect.get(target, prop, target) as unknown
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
    }
  }) }
  const lookup = createKeyLookup(2)
  for (let i = 0; i < 3; i++) lookup(counting, 'psk_guess')
  t.equal(digests, 3, 'every miss is looked up again (nothing cached for it)')
  lookup(counting, DEMO_KEYS.free)
  lookup(counting, DEMO_KEYS.pro)
  digests = 0
  lookup(counting, DEMO_KEYS.free)
  lookup(counting, DEMO_KEYS.pro)
  t.equal(digests, 0, 'two hits served from the cache')
  lookup(counting, DEMO_KEYS.business)
  digests = 0
  lookup(counting, DEMO_KEYS.free)
  t.equal(digests, 1, 'both were hit: both had a second chance, then the oldest placed (free) was evicted at the bound (2)')
})

t.test('eviction is second chance: a key hit since it was placed outlives one that was not', async (t) => {
  const snapshot = testConfig()
  let digests = 0
  const counting = { ...snapshot, keysByDigest: { get: (digestHex: string) => { digests++; return snapshot.keysByDigest.get(digestHex) } } } as unknown as typeof snapshot
  const lookup = createKeyLookup(2)
  lookup(counting, DEMO_KEYS.free) // placed first
  lookup(counting, DEMO_KEYS.pro) // placed second, never hit
  lookup(counting, DEMO_KEYS.free) // hit: free is marked
  lookup(counting, DEMO_KEYS.business) // at the bound: free gets its second chance, pro (not hit) goes
  digests = 0
  lookup(counting, DEMO_KEYS.free)
  t.equal(digests, 0, 'free, the older but hit, is still cached')
  lookup(counting, DEMO_KEYS.pro)
  t.equal(digests, 1, 'pro, the newer but never hit, was evicted')
})
