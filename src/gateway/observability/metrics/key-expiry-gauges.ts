// gateway_keys_expiring{within="7d"} and gateway_keys_expired, computed at scrape time from the
// config in force and the gateway clock (no per-request work, and a key crossing its date shows up
// at the next scrape without a reload). Kept apart from the per-request metrics in registry.ts.
import { Gauge, type Registry } from 'prom-client'
import { expiryCounts } from '../../config/key-expiry.js'
import type { ConfigSnapshot } from '../../config/types.js'

export interface KeyExpirySource {
  /** The config in force now. */
  snapshot: () => ConfigSnapshot
  /** The gateway clock, Unix ms. */
  now: () => number
}

export function registerKeyExpiryGauges (registry: Registry, source: KeyExpirySource): void {
  // One pass over the keys per gauge and scrape (its cost: bench/results/design-figures.md), nothing on the request path.
  const read = (): ReturnType<typeof expiryCounts> => expiryCounts(source.snapshot(), source.now())
  new Gauge<'within'>({
    name: 'gateway_keys_expiring',
    help: 'Enabled API keys whose expiresAt falls within the next 7 days (not yet expired), from the config in force',
    labelNames: ['within'],
    registers: [registry],
    collect () { this.set({ within: '7d' }, read().expiring) }
  })
  new Gauge({
    name: 'gateway_keys_expired',
    help: 'Enabled API keys past their expiresAt (answering 401) that are still in keys.yaml',
    registers: [registry],
    collect () { this.set(read().expired) }
  })
}
