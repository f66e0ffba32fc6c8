// The README and the docs/ pages link to each other: every relative link must point at a file that
// exists and every `#anchor` at a heading of its page (as GitHub names headings), every docs page
// must be reachable from the README, and the README stays a five-minute read.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import t from 'tap'
import { REPO_ROOT } from '../helpers/processes.js'

const README_MAX_LINES = 250
/** About five minutes at a newcomer's reading pace. */
const README_MAX_WORDS = 1_000
const PAGES = ['README.md', ...readdirSync(join(REPO_ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)]

/** The text outside fenced code blocks and inline code spans, where links are links. */
function prose (markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '')
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens; repeats get -1, -2… */
function headingAnchors (markdown: string): Set<string> {
  const seen = new Map<string, number>()
  const anchors = new Set<string>()
  for (const [, text = ''] of markdown.replace(/^```[\s\S]*?^```/gm, '').matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const base = text.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/ /g, '-')
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    anchors.add(n === 0 ? base : `${base}-${n}`)
  }
  return anchors
}

function links (markdown: string): string[] {
  return [...prose(markdown).matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1] ?? '')
}

t.test('GitHub heading anchors, as the links below expect them', async (t) => {
  t.same([...headingAnchors('# Top\n## The admin API (admin port only)\n## Runtime: Node 22, brought by npm ci\n## Top\n```\n# not a heading\n```\n')],
    ['top', 'the-admin-api-admin-port-only', 'runtime-node-22-brought-by-npm-ci', 'top-1'])
})

t.test('every relative link of the README and docs/ resolves, anchors included', async (t) => {
  let checked = 0
  for (const page of PAGES) {
    const text = readFileSync(join(REPO_ROOT, page), 'utf8')
    for (const link of links(text)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue // http:, https:, mailto: — not ours to check offline
      const [path = '', anchor] = link.split('#', 2)
      const target = path === '' ? join(REPO_ROOT, page) : resolve(dirname(join(REPO_ROOT, page)), path)
      const name = `${page} → ${link}`
      checked++
      if (!existsSync(target)) {
        t.fail(`${name}: ${relative(REPO_ROOT, target)} does not exist`)
        continue
      }
      if (anchor !== undefined) {
        t.ok(target.endsWith('.md') && headingAnchors(readFileSync(target, 'utf8')).has(anchor), `${name}: a heading of ${relative(REPO_ROOT, target)}`)
      } else {
        t.pass(name)
      }
    }
  }
  t.ok(checked > 20, `${checked} links checked: the extractor finds them`)
})

t.test('every docs page is linked from the README', async (t) => {
  const fromReadme = new Set(links(readFileSync(join(REPO_ROOT, 'README.md'), 'utf8')).map((l) => l.split('#')[0]))
  for (const page of PAGES.filter((p) => p !== 'README.md')) t.ok(fromReadme.has(page), page)
  t.ok(fromReadme.has('docs/openapi.json'), 'docs/openapi.json')
})

t.test(`the README stays short: at most ${README_MAX_LINES} lines and ${README_MAX_WORDS} words`, async (t) => {
  const text = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8')
  const lines = text.split('\n').length - 1
  t.ok(lines <= README_MAX_LINES, `${lines} lines`)
  // Words as wc -w counts them: runs of non-space characters, code and tables included.
  const words = text.split(/\s+/).filter((w) => w !== '').length
  t.ok(words <= README_MAX_WORDS, `${words} words`)
})
