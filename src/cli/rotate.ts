// `keys rotate`: a new credential for the same consumer, with the old one kept alive for a grace
// period, as an edit of keys.yaml's text that keeps its comments, order and style (the `yaml`
// package's Document API — only the two touched entries change, except that the library writes
// flow sequences with the padding of flow maps, `[ read ]`). Pure: text in, text out; main.ts
// validates the result with the gateway's own loader and writes it atomically.
import { isMap, isNode, isSeq, parseDocument, YAMLMap } from 'yaml'
import { CommandError } from './errors.js'

export const DEFAULT_GRACE = '7d'
const UNIT_MS: Readonly<Record<string, number>> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }
/** A grace longer than this is a typo, not a plan (and would overflow a date). */
const MAX_GRACE_MS = 3650 * 86_400_000
const MAX_ID_LENGTH = 64

/** `30s`, `15m`, `12h`, `7d` → milliseconds. */
export function parseGrace (text: string): number {
  const m = /^(\d{1,7})([smhd])$/.exec(text)
  const ms = m === null ? NaN : Number(m[1]) * (UNIT_MS[m[2] ?? ''] ?? NaN)
  if (Number.isNaN(ms) || ms > MAX_GRACE_MS) {
    throw new CommandError(`--grace must be a whole number of s, m, h or d (e.g. 30m, 7d; at most 3650d), got "${text}"`)
  }
  return ms
}

/** RFC 3339, seconds precision, UTC: what keys.yaml's expiresAt holds. */
export function isoSeconds (ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z')
}

function stamp (ms: number): string {
  return new Date(ms).toISOString().replace(/[-:T]/g, '').slice(0, 14)
}

export interface RotateInput {
  /** The credential to rotate. */
  id: string
  /** SHA-256 hex digest of the new key. */
  sha256: string
  graceMs: number
  now: number
}

export interface RotateOutput {
  text: string
  newId: string
  consumerId: string
  /** Unix ms the old credential stops working. */
  oldExpiresAt: number
}

/** `<consumer>-<yyyymmddHHMMSS>`, shortened to fit 64 characters, `-2`, `-3`… if taken. */
function newIdFor (consumer: string, now: number, taken: ReadonlySet<string>): string {
  const suffix = `-${stamp(now)}`
  const base = consumer.slice(0, MAX_ID_LENGTH - suffix.length - 3) + suffix
  let id = base
  for (let n = 2; taken.has(id); n++) id = `${base}-${n}`
  return id
}

export function rotateKeysText (text: string, input: RotateInput): RotateOutput {
  const doc = parseDocument(text)
  if (doc.errors.length > 0) throw new CommandError(`keys.yaml: ${doc.errors[0]?.message ?? 'malformed YAML'}`)
  const keys = doc.get('keys', true)
  if (!isSeq(keys)) throw new CommandError('keys.yaml: no "keys:" list')
  const entries = keys.items.filter((item): item is YAMLMap => isMap(item))
  const old = entries.find((entry) => entry.get('id') === input.id)
  if (old === undefined) throw new CommandError(`no key with id "${input.id}" in keys.yaml`)
  if (old.get('disabled') === true) throw new CommandError(`key "${input.id}" is disabled: issue a new key with keys create instead of rotating it`)

  const consumerId = String(old.get('consumer') ?? input.id)
  const taken = new Set(entries.map((entry) => String(entry.get('id'))))
  const newId = newIdFor(consumerId, input.now, taken)

  // Rotation never extends a credential's life: an earlier expiry already set is kept.
  const current = old.get('expiresAt')
  const currentMs = typeof current === 'string' ? Date.parse(current.length === 10 ? `${current}T00:00:00Z` : current) : NaN
  const graceEnd = Math.floor((input.now + input.graceMs) / 1000) * 1000
  const oldExpiresAt = Number.isNaN(currentMs) || currentMs > graceEnd ? graceEnd : currentMs
  if (oldExpiresAt === graceEnd) old.set('expiresAt', isoSeconds(graceEnd))

  const fresh = new YAMLMap()
  for (const [field, value] of [['id', newId], ['sha256', input.sha256], ['consumer', consumerId], ['plan', old.get('plan')]] as const) {
    fresh.add(doc.createPair(field, value))
  }
  // Same limits and scopes, copied as nodes so their style (flow or block) is the old entry's.
  for (const field of ['limits', 'scopes']) {
    const node = old.get(field, true)
    if (isNode(node)) fresh.add(doc.createPair(field, node.clone()))
  }
  fresh.flow = old.flow === true
  keys.items.splice(keys.items.indexOf(old) + 1, 0, fresh)
  // lineWidth 0: never fold a long flow entry — the file keeps its one-line-per-key form.
  return { text: doc.toString({ lineWidth: 0 }), newId, consumerId, oldExpiresAt }
}
