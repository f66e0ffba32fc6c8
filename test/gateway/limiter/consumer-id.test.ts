// The limiter id of a request: the consumer of its credential, or its client address.
import t from 'tap'
import type { KeyRecord } from '../../../src/gateway/config/types.js'
import { anonymousId, limiterId } from '../../../src/gateway/limiter/consumer-id.js'

const key: KeyRecord = { id: 'acme-ci', consumerId: 'acme', plan: 'pro', limits: { perMinute: 1, perDay: 1 }, disabled: false, expiresAt: undefined, expiresHeader: undefined, scopes: ['read', 'write'] }

t.test('a credential counts against its consumer, not its own id', async (t) => {
  t.equal(limiterId(key, '203.0.113.7'), 'acme')
})

t.test('no credential: the client address under the ip: prefix, IPv6 by its prefix', async (t) => {
  t.equal(limiterId(null, '203.0.113.7'), 'ip:203.0.113.7')
  t.equal(limiterId(null, '::ffff:203.0.113.7'), 'ip:203.0.113.7', 'an IPv4-mapped address is the IPv4 address')
  t.equal(anonymousId('2001:db8::1'), 'ip:2001:db8:0:0:0:0:0:0/64', 'default /64')
  t.equal(anonymousId('2001:db8::1', 48), anonymousId('2001:db8:0:ffff::2', 48), 'one /48, one id')
  t.not(anonymousId('2001:db8::1', 128), anonymousId('2001:db8::2', 128))
})
