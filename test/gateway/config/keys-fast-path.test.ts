import t from 'tap'
import { parse } from 'yaml'
import { parseCanonicalKeys } from '../../../src/gateway/config/keys-fast-path.js'

const D = 'ab'.repeat(32)

t.test('the canonical one-line form reads exactly as the YAML parser reads it', async (t) => {
  const texts = [
    `keys:\n  - { id: acme-prod, sha256: ${D}, plan: pro }\n`,
    `# comment\n\nkeys:   # trailing\n  - { id: a.b_c-1, sha256: ${D}, plan: free, disabled: true }\n\n  # note\n  - {id: z, sha256: ${D}, plan: business, disabled: false}\n`,
    `keys:\n  - { id: x, sha256: ${D}, plan: pro }`
  ]
  for (const text of texts) {
    const fast = parseCanonicalKeys(text)
    t.ok(fast, 'taken by the fast path')
    t.same(fast, parse(text, { schema: 'core' }), text.slice(0, 30))
  }
})

t.test('anything else is left to the YAML parser', async (t) => {
  const declined = [
    `keys:\n  - id: acme\n    sha256: ${D}\n    plan: pro\n`,
    `keys:\n  - { id: big, sha256: ${D}, plan: enterprise, limits: { perMinute: 5, perDay: 9 } }\n`,
    `keys:\n  - { id: "quoted", sha256: ${D}, plan: pro }\n`,
    `keys:\n  - { id: 12345, sha256: ${D}, plan: pro }\n`,
    `keys:\n  - { id: true, sha256: ${D}, plan: pro }\n`,
    `keys:\n  - { id: ok, sha256: ${D}, plan: null }\n`,
    `keys:\n  - { id: ok, sha256: ${D.toUpperCase()}, plan: pro }\n`,
    `keys:\n  - { id: ok, sha256: ${'1'.repeat(64)}, plan: pro }\n`,
    `keys:\n  - { id: ok, sha256: ${'1'.repeat(32)}e${'2'.repeat(31)}, plan: pro }\n`,
    `keys:\n  - { id: ok, sha256: ${D}, plan: pro, color: red }\n`,
    `keys: []\n`,
    `keys:\n`,
    `plans: {}\n`,
    `keys:\n  - { id: a, sha256: ${D}, plan: pro }\nextra: 1\n`
  ]
  for (const text of declined) t.equal(parseCanonicalKeys(text), undefined, text.slice(6, 50))
})
