// The limiter's names carry their meaning: one-letter bindings (declarations, parameters, arrow
// parameters, catch bindings; in Lua, locals, parameters and loop variables) are counted per 100
// lines in src/gateway/limiter/ and held at or below a ceiling, so they cannot creep back. Prints the
// count per file and the rest of src/ for comparison. `_` (an ignored binding) does not count.
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import ts from 'typescript'

const ROOT = new URL('../../../', import.meta.url).pathname

function filesUnder (dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? filesUnder(path) : /\.(ts|lua)$/.test(name) ? [path] : []
  })
}

const oneLetter = (name: string): boolean => /^[A-Za-z]$/.test(name)

function typescriptCount (path: string): number {
  const source = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true)
  let count = 0
  const names = (name: ts.BindingName): void => {
    if (ts.isIdentifier(name)) { if (oneLetter(name.text)) count++; return }
    for (const element of name.elements) if (!ts.isOmittedExpression(element)) names(element.name)
  }
  const visit = (node: ts.Node): void => {
    if (ts.isVariableDeclaration(node) || ts.isParameter(node)) names(node.name)
    else if ((ts.isFunctionDeclaration(node) || ts.isClassDeclaration(node)) && node.name !== undefined && oneLetter(node.name.text)) count++
    ts.forEachChild(node, visit)
  }
  visit(source)
  return count
}

function luaCount (path: string): number {
  let count = 0
  for (const line of readFileSync(path, 'utf8').split('\n').map((l) => l.replace(/--.*$/, ''))) {
    const local = /\blocal\s+(?!function)([\w\s,]+?)(?:=|$)/.exec(line)
    const fn = /\bfunction\s*[\w.]*\s*\(([^)]*)\)/.exec(line)
    const loop = /\bfor\s+([\w\s,]+?)\s+(?:=|in)\b/.exec(line)
    for (const list of [local?.[1], fn?.[1], loop?.[1]]) {
      if (list !== undefined) count += list.split(',').map((n) => n.trim()).filter(oneLetter).length
    }
  }
  return count
}

export function density (files: readonly string[]): { bindings: number, lines: number, per100: number } {
  let bindings = 0
  let lines = 0
  for (const file of files) {
    bindings += file.endsWith('.lua') ? luaCount(file) : typescriptCount(file)
    lines += readFileSync(file, 'utf8').split('\n').length - 1
  }
  return { bindings, lines, per100: 100 * bindings / Math.max(1, lines) }
}

/** The ceiling: 0 now (7.35 before, 1.43 before grant.lua was named: docs/limiter-internals.md, "Names"); room for a handful, not a creep back. */
const CEILING_PER_100 = 0.5

const limiterFiles = filesUnder(join(ROOT, 'src/gateway/limiter'))
const otherFiles = filesUnder(join(ROOT, 'src')).filter((f) => !f.includes('/src/gateway/limiter/'))
for (const file of limiterFiles) {
  const { bindings, lines, per100 } = density([file])
  if (bindings > 0) t.comment(`${file.slice(ROOT.length)}: ${bindings} in ${lines} lines (${per100.toFixed(1)} per 100)`)
}
const limiter = density(limiterFiles)
const rest = density(otherFiles)
t.comment(`src/gateway/limiter: ${limiter.bindings} one-letter bindings in ${limiter.lines} lines (${limiter.per100.toFixed(2)} per 100); the rest of src/: ${rest.bindings} in ${rest.lines} (${rest.per100.toFixed(2)} per 100)`)
t.ok(limiter.per100 <= CEILING_PER_100, `the limiter's one-letter density ${limiter.per100.toFixed(2)} per 100 lines is at most ${CEILING_PER_100}`)
