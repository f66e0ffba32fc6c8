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

const HEXTET = /^[0-9a-fA-F]{1,4}$/
const IPV4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/

function parseIpv4 (text: string): [number, number, number, number] | undefined {
  const m = IPV4.exec(text)
  if (m === null) return undefined
  const octets = [Number(m[1]), Number(m[2]), Number(m[3]), Number(m[4])] as [number, number, number, number]
  return octets.every((o) => o <= 255) ? octets : undefined
}

/** The eight 16-bit groups of an IPv6 address (zone id dropped, embedded IPv4 tail allowed); undefined if it is none. */
export function parseIpv6 (address: string): number[] | undefined {
  let text = address
  const zone = text.indexOf('%')
  if (zone !== -1) text = text.slice(0, zone)
  const lastColon = text.lastIndexOf(':')
  const tail = text.slice(lastColon + 1)
  if (tail.indexOf('.') !== -1) {
    const v4 = parseIpv4(tail)
    if (v4 === undefined) return undefined
    text = text.slice(0, lastColon + 1) + ((v4[0] << 8) | v4[1]).toString(16) + ':' + ((v4[2] << 8) | v4[3]).toString(16)
  }
  const halves = text.split('::')
  if (halves.length > 2) return undefined
  const head = halves[0] === '' || halves[0] === undefined ? [] : halves[0].split(':')
  const rest = halves.length === 2 && halves[1] !== '' && halves[1] !== undefined ? halves[1].split(':') : []
  const missing = 8 - head.length - rest.length
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined
  const parts = [...head, ...new Array<string>(missing).fill('0'), ...rest]
  const groups: number[] = []
  for (const part of parts) {
    if (!HEXTET.test(part)) return undefined
    groups.push(parseInt(part, 16))
  }
  return groups
}
