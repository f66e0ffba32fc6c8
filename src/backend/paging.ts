// Keyset paging shared by the list endpoints: the opaque cursor (base64url of "<list>:<last id>") and the
// `Link: rel="next"` header that hands it to the client. Cursors are checked strictly; anything that is
// not exactly what encodeCursor produces for this list is a 400.
import { backendErrors } from '../interface/errors.js'
import { MAX_ID } from '../interface/schemas.js'

export type CursorKind = 'pets' | 'orders'

const CURSOR_ALPHABET = /^[A-Za-z0-9_-]+$/
const CURSOR_TEXT = /^([a-z]+):([1-9][0-9]{0,15})$/

export function encodeCursor (kind: CursorKind, lastId: number): string {
  return Buffer.from(`${kind}:${lastId}`, 'utf8').toString('base64url')
}

/** The id after which the page starts: 0 without a cursor. */
export function decodeCursor (kind: CursorKind, cursor: string | undefined): number {
  if (cursor === undefined) return 0
  const invalid = backendErrors.invalidCursor()
  if (!CURSOR_ALPHABET.test(cursor)) throw invalid
  const bytes = Buffer.from(cursor, 'base64url')
  if (bytes.toString('base64url') !== cursor) throw invalid
  const match = CURSOR_TEXT.exec(bytes.toString('utf8'))
  if (match === null || match[1] !== kind) throw invalid
  const id = Number(match[2])
  if (id > MAX_ID) throw invalid
  return id
}

export interface Page<T> {
  items: T[]
  /** Value of the Link header announcing the next page, when there is one. */
  link: string | undefined
}

/**
 * Cuts `rows` (fetched with limit + 1) to one page and, when a row was left over, builds the link to the
 * next page, keeping the caller's filters.
 */
export function toPage<T extends { id: number }> (
  rows: T[], kind: CursorKind, path: string, limit: number, filters: Record<string, string | undefined> = {}
): Page<T> {
  if (rows.length <= limit) return { items: rows, link: undefined }
  const items = rows.slice(0, limit)
  const last = items[items.length - 1] as T
  const query = new URLSearchParams({ cursor: encodeCursor(kind, last.id), limit: String(limit) })
  for (const [name, value] of Object.entries(filters)) {
    if (value !== undefined) query.set(name, value)
  }
  return { items, link: `<${path}?${query.toString()}>; rel="next"` }
}
