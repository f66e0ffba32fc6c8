// New API keys: long, random, base62 with a readable prefix, so a leaked key is recognisable in a
// scan and carries ~238 bits of entropy. Only the SHA-256 digest ever goes into keys.yaml.
import { randomBytes } from 'node:crypto'

export const KEY_PREFIX = 'psk_'
export const KEY_RANDOM_CHARS = 40
const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'

/** Uniform base62 by rejection sampling: bytes ≥ 248 would bias the first 8 symbols. */
export function randomBase62 (length: number): string {
  let out = ''
  while (out.length < length) {
    for (const byte of randomBytes(length)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62]
    }
  }
  return out
}

export function generateKey (): string {
  return KEY_PREFIX + randomBase62(KEY_RANDOM_CHARS)
}
