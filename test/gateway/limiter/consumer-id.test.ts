// The limiter id of a request: the consumer of its credential, or its client address.
import t from 'tap'
import type { KeyRecord } from '../../../src/gateway/config/types.js'
import { anonymousId, limiterId } from '../../../src/gateway/limiter/consumer-id.js'

const key: KeyRecord = { id: 'acme-ci', consumerId: 'acme', plan: 'pro', limits: { perMinute: 1, perDay: 1 }, disabled: false, expiresAt: undefined, scopes: ['read', 'write'] }

t.test('a credential counts against its consumer, not its own id', async (t) => {
  t.equal(limiterId(key, '203.0.113.7'), 'acme')
})

t.test('no credential: the client address under the ip: prefix', async (t) => {
  t.equal(limiterId(null, '203.0.113.7'), 'ip:203.0.113.7')
  t.equal(anonymousId('2001:db8::1'), 'ip:2001:db8::1')
})
