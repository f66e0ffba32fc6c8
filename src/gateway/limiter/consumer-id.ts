// Which limiter id a request is counted against: its consumer (every credential of one consumer
// shares windows, bans and escalation), or, without a valid key, its client address.
import type { KeyRecord } from '../config/types.js'
import { ANONYMOUS_ID_PREFIX, anonymousClientKey } from '../edge/client-address.js'

/** The limiter id of requests without a valid key: an IPv4 address, or an IPv6 address's prefix of `ipv6Prefix` bits. */
export function anonymousId (address: string, ipv6Prefix?: number): string {
  return ANONYMOUS_ID_PREFIX + anonymousClientKey(address, ipv6Prefix)
}

/** The limiter id of a request: its consumer, or its client address when it has no key. */
export function limiterId (consumer: KeyRecord | null, address: string, ipv6Prefix?: number): string {
  return consumer === null ? anonymousId(address, ipv6Prefix) : consumer.consumerId
}
