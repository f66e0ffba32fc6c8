// Parses `Authorization: Bearer <token>` strictly (RFC 6750 b64token, one space, scheme in any
// case) and digests the token: the only form in which a key is ever compared or stored.
import { createHash } from 'node:crypto'

export const MAX_TOKEN_LENGTH = 256

export type BearerResult =
  | { readonly kind: 'missing' }
  | { readonly kind: 'malformed' }
  | { readonly kind: 'token', readonly token: string }

const BEARER = /^bearer ([A-Za-z0-9\-._~+/]+=*)$/i
const MISSING: BearerResult = Object.freeze({ kind: 'missing' })
const MALFORMED: BearerResult = Object.freeze({ kind: 'malformed' })

export function parseBearer (header: string | undefined): BearerResult {
  if (header === undefined || header === '') return MISSING
  if (header.length > MAX_TOKEN_LENGTH + 7) return MALFORMED
  const match = BEARER.exec(header)
  const token = match?.[1]
  return token === undefined ? MALFORMED : { kind: 'token', token }
}

export function keyDigest (token: string): string {
  return createHash('sha256').update(token).digest('hex')
}
