// The anonymous limiter's notion of "one client": an IPv4 address, or an IPv6 prefix. A single
// IPv6 subscriber is routinely given a whole /64 (or more), so counting IPv6 per address would hand
// one client 2^64 anonymous windows. IPv4-mapped IPv6 (`::ffff:a.b.c.d`, what a dual-stack socket
// reports for an IPv4 peer) is the IPv4 address. And the reading of an address as a proxy may
// write it (`IP:port`, `[v6]:port`, a zone id), so that a port or a spelling is never a client of
// its own. Pure functions: no I/O, no Node APIs.

/** The limiter's anonymous ids are this plus `anonymousClientKey(…)`; keys' ids never contain ':'. */
export const ANONYMOUS_ID_PREFIX = 'ip:'

/** Default IPv6 prefix length of one anonymous client (`anonymous.ipv6Prefix` in plans.yaml). */
export const DEFAULT_IPV6_PREFIX = 64
export const MIN_IPV6_PREFIX = 32
export const MAX_IPV6_PREFIX = 128

/**
 * The key one anonymous client is counted under: an IPv4 address as is (mapped IPv6 unwrapped), an
 * IPv6 address masked to `ipv6Prefix` bits as `hhhh:…:hhhh/<prefix>` (eight groups, lower case, no
 * leading zeros), so every spelling of one network gives one key. Text that is no IP address is
 * returned unchanged (it still gets a window of its own).
 */
export function anonymousClientKey (address: string, ipv6Prefix: number = DEFAULT_IPV6_PREFIX): string {
  if (address.indexOf(':') === -1) return address
  const groups = parseIpv6(address)
  if (groups === undefined) return address
  if (isIpv4Mapped(groups)) {
    const high = groups[6] ?? 0
    const low = groups[7] ?? 0
    return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`
  }
  const prefix = Math.min(MAX_IPV6_PREFIX, Math.max(0, Math.floor(ipv6Prefix)))
  let out = ''
  for (let i = 0; i < 8; i++) {
    const keep = Math.min(16, Math.max(0, prefix - i * 16))
    const mask = keep === 0 ? 0 : (0xffff << (16 - keep)) & 0xffff
    out += (i === 0 ? '' : ':') + ((groups[i] ?? 0) & mask).toString(16)
  }
  return `${out}/${prefix}`
}

/** A port after an address (`:8080`): one to five digits, at most 65535. */
const PORT = /^:(\d{1,5})$/

function validPort (text: string): boolean {
  const m = PORT.exec(text)
  return m !== null && Number(m[1]) <= 65535
}

function ipv4Text (text: string): string | undefined {
  return parseIpv4(text)?.join('.')
}

function ipv6Text (text: string): string | undefined {
  const zone = text.indexOf('%')
  const address = zone === -1 ? text : text.slice(0, zone)
  return parseIpv6(address) === undefined ? undefined : address.toLowerCase()
}

/**
 * An address as a proxy writes it in `X-Forwarded-For`, reduced to the address alone: `IP:port`,
 * `[v6]`, `[v6]:port` and zone ids (`fe80::1%eth0`) give the address; IPv4 in dotted decimal without
 * leading zeros (`010.1.1.1` and `10.1.1.1` are one address), IPv6 in lower case. Undefined for
 * anything that is not an address (`unknown`, an obfuscated name, an empty entry, a bad port).
 */
export function normaliseAddress (text: string): string | undefined {
  const s = text.trim()
  if (s.charCodeAt(0) === 91) {
    const close = s.indexOf(']')
    if (close === -1) return undefined
    const rest = s.slice(close + 1)
    return rest === '' || validPort(rest) ? ipv6Text(s.slice(1, close)) : undefined
  }
  const colon = s.indexOf(':')
  if (colon === -1) return ipv4Text(s)
  if (s.indexOf(':', colon + 1) === -1) return validPort(s.slice(colon)) ? ipv4Text(s.slice(0, colon)) : undefined
  return ipv6Text(s)
}

/**
 * An address as the gateway writes it for the backend (`X-Forwarded-For`): IPv4-mapped IPv6, what a
 * dual-stack socket reports for an IPv4 peer (`::ffff:203.0.113.7`), as the IPv4 address; any other
 * text unchanged.
 */
export function plainAddress (address: string): string {
  if (address.length < 14 || address.indexOf('.') === -1) return address
  const groups = parseIpv6(address)
  if (groups === undefined || !isIpv4Mapped(groups)) return address
  const high = groups[6] ?? 0
  const low = groups[7] ?? 0
  return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`
}

/** Whether an address (IPv4, IPv6 or IPv4-mapped IPv6) is a loopback one: 127.0.0.0/8 or ::1. */
export function isLoopbackAddress (address: string): boolean {
  if (address.indexOf(':') === -1) return parseIpv4(address)?.[0] === 127
  const groups = parseIpv6(address)
  if (groups === undefined) return false
  if (isIpv4Mapped(groups)) return (groups[6] ?? 0) >> 8 === 127
  return groups.every((g, i) => g === (i === 7 ? 1 : 0))
}

function isIpv4Mapped (groups: readonly number[]): boolean {
  return groups[0] === 0 && groups[1] === 0 && groups[2] === 0 && groups[3] === 0 && groups[4] === 0 && groups[5] === 0xffff
}

const IPV4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/

function parseIpv4 (text: string): [number, number, number, number] | undefined {
  const m = IPV4.exec(text)
  if (m === null) return undefined
  const octets = [Number(m[1]), Number(m[2]), Number(m[3]), Number(m[4])] as [number, number, number, number]
  return octets.every((o) => o <= 255) ? octets : undefined
}

function hexValue (c: number): number {
  if (c >= 48 && c <= 57) return c - 48
  if (c >= 97 && c <= 102) return c - 87
  if (c >= 65 && c <= 70) return c - 55
  return -1
}

/**
 * The eight 16-bit groups of an IPv6 address (zone id dropped, embedded IPv4 tail allowed); undefined
 * if it is none. One pass over the characters: it runs for every anonymous IPv6 request.
 */
export function parseIpv6 (address: string): number[] | undefined {
  let end = address.indexOf('%')
  if (end === -1) end = address.length
  const groups = [0, 0, 0, 0, 0, 0, 0, 0]
  let count = 0
  let gap = -1
  let i = 0
  if (address.charCodeAt(0) === 58 && address.charCodeAt(1) === 58) {
    gap = 0
    i = 2
  }
  while (i < end) {
    let j = i
    let value = 0
    for (let digit = hexValue(address.charCodeAt(j)); j < end && j - i < 5 && digit >= 0; digit = hexValue(address.charCodeAt(++j))) value = value * 16 + digit
    if (j < end && address.charCodeAt(j) === 46) {
      const v4 = count <= 6 ? parseIpv4(address.slice(i, end)) : undefined
      if (v4 === undefined) return undefined
      groups[count++] = (v4[0] << 8) | v4[1]
      groups[count++] = (v4[2] << 8) | v4[3]
      break
    }
    if (j === i || j - i > 4 || count === 8) return undefined
    groups[count++] = value
    if (j === end) break
    if (address.charCodeAt(j) !== 58) return undefined
    if (address.charCodeAt(j + 1) === 58) {
      if (gap !== -1) return undefined
      gap = count
      i = j + 2
    } else {
      i = j + 1
      if (i === end) return undefined
    }
  }
  if (gap === -1) return count === 8 ? groups : undefined
  if (count > 7) return undefined
  const tail = count - gap
  for (let k = 0; k < tail; k++) groups[7 - k] = groups[count - 1 - k] ?? 0
  for (let k = gap; k < 8 - tail; k++) groups[k] = 0
  return groups
}
