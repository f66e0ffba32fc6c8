// Which limiter id a request is counted against: its consumer (every credential of one consumer
// shares windows, bans and escalation), or, without a valid key, its client address. The anonymous
// id is built in this one place, so how addresses are normalised changes in one line.
import type { KeyRecord } from '../config/types.js'

export const ANONYMOUS_PREFIX = 'ip:'

/** The limiter id of requests without a valid key, from the client address. */
export function anonymousId (address: string): string {
  return ANONYMOUS_PREFIX + address
}

/** The limiter id of a request: its consumer, or its client address when it has no key. */
export function limiterId (consumer: KeyRecord | null, address: string): string {
  return consumer === null ? anonymousId(address) : consumer.consumerId
}
