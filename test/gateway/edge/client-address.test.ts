// Which anonymous window an address is counted in: IPv4 per address, IPv6 per prefix, mapped IPv6 as IPv4;
// and the reading of addresses as proxies write them (ports, brackets, zone ids).
import t from 'tap'
import { anonymousClientKey, isLoopbackAddress, normaliseAddress, parseIpv6 } from '../../../src/gateway/edge/client-address.js'

t.test('IPv4 is counted per address', async (t) => {
  t.equal(anonymousClientKey('203.0.113.7'), '203.0.113.7')
  t.not(anonymousClientKey('203.0.113.7'), anonymousClientKey('203.0.113.8'))
})

t.test('IPv4-mapped IPv6 is the IPv4 address, in every spelling', async (t) => {
  t.equal(anonymousClientKey('::ffff:203.0.113.7'), '203.0.113.7')
  t.equal(anonymousClientKey('::FFFF:203.0.113.7'), '203.0.113.7')
  t.equal(anonymousClientKey('0:0:0:0:0:ffff:cb00:7107'), '203.0.113.7')
  t.equal(anonymousClientKey('::ffff:127.0.0.1', 128), '127.0.0.1')
})

t.test('IPv6 addresses of one /64 share a key, another /64 gets its own', async (t) => {
  const a = anonymousClientKey('2001:db8:1:2::1')
  t.equal(a, '2001:db8:1:2:0:0:0:0/64')
  t.equal(anonymousClientKey('2001:db8:1:2:ffff:ffff:ffff:ffff'), a)
  t.equal(anonymousClientKey('2001:0DB8:0001:0002:abcd::9'), a, 'case and leading zeros do not matter')
  t.equal(anonymousClientKey('2001:db8:1:2::1%eth0'), a, 'a zone id does not matter')
  t.not(anonymousClientKey('2001:db8:1:3::1'), a)
})

t.test('the prefix length is configurable, including within a group', async (t) => {
  t.equal(anonymousClientKey('2001:db8:1:2::1', 48), '2001:db8:1:0:0:0:0:0/48')
  t.equal(anonymousClientKey('2001:db8:1:2::1', 128), '2001:db8:1:2:0:0:0:1/128')
  t.equal(anonymousClientKey('2001:db8:1:2::1', 128), anonymousClientKey('2001:db8:1:2:0:0:0:1', 128))
  t.not(anonymousClientKey('2001:db8:1:2::1', 128), anonymousClientKey('2001:db8:1:2::2', 128))
  t.equal(anonymousClientKey('2001:db8:12ff::1', 40), '2001:db8:1200:0:0:0:0:0/40')
  t.equal(anonymousClientKey('2001:db8:12ff::1', 40), anonymousClientKey('2001:db8:1200::', 40))
  t.equal(anonymousClientKey('::1', 64), '0:0:0:0:0:0:0:0/64')
})

t.test('text that is no address keeps a key of its own', async (t) => {
  for (const text of ['unknown', '1:2:3', '1::2::3', '12345::1', '::ffff:1.2.3.999', 'g::1', '1:2:3:4:5:6:7:8:9']) {
    t.equal(anonymousClientKey(text), text, text)
  }
})

t.test('parseIpv6 reads the usual forms', async (t) => {
  t.same(parseIpv6('::'), [0, 0, 0, 0, 0, 0, 0, 0])
  t.same(parseIpv6('1::'), [1, 0, 0, 0, 0, 0, 0, 0])
  t.same(parseIpv6('1:2:3:4:5:6:7:8'), [1, 2, 3, 4, 5, 6, 7, 8])
  t.same(parseIpv6('::1.2.3.4'), [0, 0, 0, 0, 0, 0, 0x102, 0x304])
  t.equal(parseIpv6('1:2:3:4:5:6:7::8'), undefined, ':: must stand for at least one group')
})

t.test('parseIpv6 agrees with node:net on what is an address, over many spellings', async (t) => {
  const { isIPv6 } = await import('node:net')
  const samples = ['::', '::1', '1::', '1:2::', '::2:3', 'fe80::1%eth0', '1:2:3:4:5:6:7:8', '1:2:3:4:5:6::8', '1::3:4:5:6:7:8', '::ffff:1.2.3.4', '1:2:3:4:5:6:1.2.3.4',
    '1:2:3:4:5:6:7:1.2.3.4', ':1::', '1:', ':1', '1:::2', '1::2::3', '12345::', 'abcd:ef01::', 'ABCD::EF01', '::1.2.3', '1.2.3.4', '::g', '', ':', '1:2:3:4:5:6:7:8:9', '::ffff:256.1.1.1']
  for (const text of samples) t.equal(parseIpv6(text) !== undefined, isIPv6(text), text)
  t.same(parseIpv6('1:2:3:4:5:6::8'), [1, 2, 3, 4, 5, 6, 0, 8])
  t.same(parseIpv6('ABCD::EF01'), [0xabcd, 0, 0, 0, 0, 0, 0, 0xef01])
})

t.test('normaliseAddress reduces what proxies write to the address alone', async (t) => {
  const cases: Array<[string, string | undefined]> = [
    ['198.51.100.77', '198.51.100.77'],
    [' 198.51.100.77 ', '198.51.100.77'],
    ['198.51.100.77:51234', '198.51.100.77'],
    ['198.051.100.077', '198.51.100.77'],
    ['[2001:db8::77]:443', '2001:db8::77'],
    ['[2001:DB8::77]', '2001:db8::77'],
    ['2001:db8::77', '2001:db8::77'],
    ['fe80::1%eth0', 'fe80::1'],
    ['[fe80::1%eth0]:8080', 'fe80::1'],
    ['::ffff:198.51.100.77', '::ffff:198.51.100.77'],
    ['', undefined],
    ['unknown', undefined],
    ['_hidden', undefined],
    ['198.51.100.77:', undefined],
    ['198.51.100.77:70000', undefined],
    ['198.51.100.77:80:80', undefined],
    ['198.51.100.256', undefined],
    ['[2001:db8::77', undefined],
    ['[2001:db8::77]x', undefined],
    ['[198.51.100.77]:80', undefined],
    ['evil.example:80', undefined]
  ]
  for (const [text, expected] of cases) t.equal(normaliseAddress(text), expected, JSON.stringify(text))
})

t.test('isLoopbackAddress: 127.0.0.0/8, ::1 and their mapped forms only', async (t) => {
  for (const address of ['127.0.0.1', '127.255.0.9', '::1', '0:0:0:0:0:0:0:1', '::ffff:127.0.0.1']) t.ok(isLoopbackAddress(address), address)
  for (const address of ['128.0.0.1', '10.0.0.1', '::2', '::', '::ffff:10.0.0.1', 'localhost', '127.0.0', '']) t.notOk(isLoopbackAddress(address), address)
})
