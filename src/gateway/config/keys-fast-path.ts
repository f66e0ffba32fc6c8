// keys.yaml grows to 100,000 entries, and a general YAML parser spends a large share of the 1 s
// budget for start-up and reload on that many flow mappings (bench/results/design-figures.md).
// Almost every such file is machine-written in one canonical line form (the one `petstore-gateway
// keys create` prints), so this reads exactly that form with one regular expression per line, and
// declines (returns undefined) on anything else — comments aside — so the general parser handles
// every other file. It only accepts values that YAML would also read as plain strings/booleans, so
// both paths yield the same data.
const HEADER = /^keys:[ \t]*(#.*)?$/
const SKIP = /^[ \t]*(#.*)?$/
const ENTRY = /^ {2}- \{ ?id: ([A-Za-z][A-Za-z0-9._-]{0,63}), sha256: ([0-9a-f]{64}), plan: ([a-z][a-z0-9_-]{0,31})(?:, disabled: (true|false))? ?\}[ \t]*$/
/** Plain scalars that YAML's core schema reads as booleans or null, never strings. */
const YAML_KEYWORDS = new Set(['true', 'True', 'TRUE', 'false', 'False', 'FALSE', 'null', 'Null', 'NULL'])
/** A hex digest YAML's core schema reads as a number (all digits, or digits `e` digits). */
const NUMERIC_DIGEST = /^[0-9]+(e[0-9]+)?$/

export interface FastKeyEntry { id: string, sha256: string, plan: string, disabled?: boolean }

export function parseCanonicalKeys (text: string): { keys: FastKeyEntry[] } | undefined {
  const lines = text.split('\n')
  let i = 0
  while (i < lines.length && SKIP.test(lines[i] ?? '')) i++
  if (i >= lines.length || !HEADER.test(lines[i] ?? '')) return undefined
  const keys: FastKeyEntry[] = []
  for (i++; i < lines.length; i++) {
    const line = lines[i] ?? ''
    const m = ENTRY.exec(line)
    if (m === null) {
      if (SKIP.test(line)) continue
      return undefined
    }
    const [, id = '', sha256 = '', plan = '', disabled] = m
    if (YAML_KEYWORDS.has(id) || YAML_KEYWORDS.has(plan) || NUMERIC_DIGEST.test(sha256)) return undefined
    keys.push(disabled === undefined ? { id, sha256, plan } : { id, sha256, plan, disabled: disabled === 'true' })
  }
  return keys.length === 0 ? undefined : { keys }
}
