// The load step of src/ts-resolve.ts: what Node's stripper makes of a source is kept in
// node_modules/.cache/ts-strip under a name made of the Node version, the file's URL and its text, a later
// process runs what is kept there, a changed file gets another name (a stale entry is never run), and the same
// text at another path (another checkout) gets its own entry naming its own path.
import { spawnSync } from 'node:child_process'
import { createHash, randomUUID } from 'node:crypto'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { stripTypeScriptTypes } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import t from 'tap'
import { CHILD_ENV, REPO_ROOT, TS_NODE_ARGS } from './helpers/processes.js'

const CACHE_DIR = join(REPO_ROOT, 'node_modules', '.cache', 'ts-strip')

function cacheEntry (path: string, source: string): string {
  const url = pathToFileURL(path).href
  return join(CACHE_DIR, `${createHash('sha256').update(process.version).update('\0').update(url).update('\0').update(source).digest('hex')}.js`)
}

function run (entry: string): { status: number | null, stdout: string, stderr: string } {
  return spawnSync(process.execPath, [...TS_NODE_ARGS, entry], { encoding: 'utf8', timeout: 20_000, env: { ...process.env, ...CHILD_ENV } })
}

t.test('in this process: a source never stripped before is stripped quietly, kept, and runs', async (t) => {
  // tap's test processes run on this hook too (package.json "tap" node-arg): a file with a nonce in its text is a
  // cache miss here, so this process strips it and writes the entry, as a process on a cold cache does.
  const dir = mkdtempSync(join(tmpdir(), 'ts-resolve-here-'))
  const nonce = randomUUID()
  const source = `const greeting: string = 'here ${nonce}'\nexport default greeting\n`
  const path = join(dir, 'here.ts')
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n')
  writeFileSync(path, source)
  const entry = cacheEntry(path, source)
  t.teardown(() => {
    rmSync(dir, { recursive: true, force: true })
    rmSync(entry, { force: true })
  })
  t.notOk(existsSync(entry), 'not kept before')
  const warnings: string[] = []
  const onWarning = (warning: Error): void => { warnings.push(`${warning.name}: ${warning.message}`) }
  process.on('warning', onWarning)
  const emitWarning = process.emitWarning
  const loaded = await import(pathToFileURL(path).href) as { default: string }
  // A warning is emitted on the next tick: wait one turn before reading what was seen.
  await new Promise((resolve) => setImmediate(resolve))
  process.off('warning', onWarning)
  t.equal(loaded.default, `here ${nonce}`, 'the stripped module runs')
  t.same(warnings, [], 'no ExperimentalWarning from the stripping')
  t.equal(process.emitWarning, emitWarning, 'process.emitWarning is put back after it')
  t.equal(readFileSync(entry, 'utf8'), stripTypeScriptTypes(source, { mode: 'strip', sourceUrl: pathToFileURL(path).href }), 'kept: Node\'s own stripping of the file')
  t.same(readdirSync(CACHE_DIR).filter((name) => name.startsWith(`${entry.slice(CACHE_DIR.length + 1)}.`)), [], 'no partial file is left beside it')
})

t.test('a source is stripped once, kept under its text\'s hash, and what is kept is what the next process runs', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ts-resolve-'))
  // A nonce in the text: this run's entries are new, whatever earlier runs left in the cache.
  const nonce = randomUUID()
  const helper = `export const greeting: string = 'hello ${nonce}'\n`
  const main = `import { greeting } from './helper.js'\nconst shown: string = greeting\nconsole.log(shown)\n`
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n')
  writeFileSync(join(dir, 'helper.ts'), helper)
  writeFileSync(join(dir, 'main.ts'), main)
  const [helperEntry, mainEntry] = [cacheEntry(join(dir, 'helper.ts'), helper), cacheEntry(join(dir, 'main.ts'), main)]
  const changed = `export const greeting: string = 'changed ${nonce}'\n`
  const changedEntry = cacheEntry(join(dir, 'helper.ts'), changed)
  const other = mkdtempSync(join(tmpdir(), 'ts-resolve-other-'))
  const otherEntry = cacheEntry(join(other, 'helper.ts'), helper)
  t.teardown(() => {
    for (const made of [dir, other]) rmSync(made, { recursive: true, force: true })
    for (const entry of [helperEntry, mainEntry, changedEntry, otherEntry]) rmSync(entry, { force: true })
  })

  const first = run(join(dir, 'main.ts'))
  t.equal(first.stderr, '', 'no ExperimentalWarning on the child\'s stderr')
  t.equal(first.stdout, `hello ${nonce}\n`)
  const helperUrl = pathToFileURL(join(dir, 'helper.ts')).href
  t.equal(readFileSync(helperEntry, 'utf8'), stripTypeScriptTypes(helper, { mode: 'strip', sourceUrl: helperUrl }), 'kept: Node\'s own stripping of the file, byte for byte')
  t.ok(existsSync(mainEntry), 'the entry point is kept too')

  // The same text in another checkout: its own entry, whose sourceURL is its own path (V8 counts coverage and
  // stack frames by it), not the first checkout's.
  writeFileSync(join(other, 'package.json'), '{ "type": "module" }\n')
  writeFileSync(join(other, 'helper.ts'), helper)
  writeFileSync(join(other, 'main.ts'), main)
  t.equal(run(join(other, 'main.ts')).stdout, `hello ${nonce}\n`)
  const otherUrl = pathToFileURL(join(other, 'helper.ts')).href
  t.equal(readFileSync(otherEntry, 'utf8'), stripTypeScriptTypes(helper, { mode: 'strip', sourceUrl: otherUrl }), 'the other checkout\'s file has an entry of its own')
  t.match(readFileSync(otherEntry, 'utf8'), otherUrl, 'naming its own path')

  // What is kept is what runs: an entry rewritten in place is what the next process prints.
  writeFileSync(helperEntry, `export const greeting = 'from the cache ${nonce}'\n`)
  t.equal(run(join(dir, 'main.ts')).stdout, `from the cache ${nonce}\n`)

  // A changed file has another name: the rewritten entry of its old text is never run again.
  writeFileSync(join(dir, 'helper.ts'), changed)
  t.equal(run(join(dir, 'main.ts')).stdout, `changed ${nonce}\n`)
  t.ok(existsSync(changedEntry))
})
