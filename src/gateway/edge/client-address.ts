// The anonymous limiter's notion of "one client": an IPv4 address, or an IPv6 prefix. A single
// IPv6 subscriber is routinely given a whole /64 (or more), so counting IPv6 per address would hand
// one client 2^64 anonymous windows. IPv4-mapped IPv6 (`::ffff:a.b.c.d`, what a dual-stack socket
// reports for an IPv4 peer) is the IPv4 address. Pure functions: no I/O, no Node APIs.

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
