// Lets Node run the TypeScript sources as they are, on its own type stripping, with no compiler and no
// loader of ours beyond this hook: stripping only blanks the types out, so every line and column
// stays where it is (V8's coverage maps straight onto the .ts files). The sources import each other as
// './x.js' (tsconfig NodeNext: what `npm run build` emits), and Node does not map a '.js' that is not
// there to the '.ts' beside it; this hook does, for relative imports made from a .ts file only (packages
// resolve untouched). Preloaded with `--import` by every way the sources run unbuilt: `npm start` and
// the other package.json scripts, the processes start.ts supervises, the config parse worker, the
// benches' processes and tap's test processes ("tap" `node-arg`); the built image runs dist/ without it.
//
// Stripping is also the largest part of starting a process on the sources (about 0.4 s of CPU of a
// gateway's 2 s, Node's wasm stripper on 600 kB of our .ts), and the tests start hundreds of them: the
// load step keeps what Node's own stripper (module.stripTypeScriptTypes, the same one) made of each
// of our files in node_modules/.cache/, named by a hash of the Node version, the file's URL and its text (the
// stripped text ends with its own `//# sourceURL=`: an entry of another checkout's identical file would make V8
// count this one's coverage and stack frames under that path), so the text Node compiles is byte for byte what
// it would have stripped itself. A file that changes gets a
// new name (a cache cannot go stale; old entries are only dead weight), and a cache that cannot be
// read or written is skipped. Files under node_modules are left to Node.
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { registerHooks, stripTypeScriptTypes } from 'node:module'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const RELATIVE_JS = /^\.{1,2}\/.*\.js$/
const STRIP_CACHE_DIR = join(fileURLToPath(new URL('..', import.meta.url)), 'node_modules', '.cache', 'ts-strip')

/**
 * `make()` without the ExperimentalWarning Node 22 prints at the first call of stripTypeScriptTypes:
 * Node's own stripping of the same file prints none, and the tests read children's stderr.
 */
function quietly<T> (make: () => T): T {
  const emitWarning = process.emitWarning
  process.emitWarning = () => {}
  try {
    return make()
  } finally {
    process.emitWarning = emitWarning
  }
}

/** What Node's stripper makes of `source` (the file at `url`), from the cache when it was made before. */
function strippedSource (url: string, source: string): string {
  const name = createHash('sha256').update(process.version).update('\0').update(url).update('\0').update(source).digest('hex')
  const cached = join(STRIP_CACHE_DIR, `${name}.js`)
  try {
    return readFileSync(cached, 'utf8')
  } catch {
    const stripped = quietly(() => stripTypeScriptTypes(source, { mode: 'strip', sourceUrl: url }))
    // Written beside its name and renamed into place, so a process never reads another's half-written file.
    const partial = `${cached}.${process.pid}.${process.hrtime.bigint()}`
    try {
      mkdirSync(STRIP_CACHE_DIR, { recursive: true })
      writeFileSync(partial, stripped)
      renameSync(partial, cached)
    } catch {
      // A read-only checkout or a full disk: every process strips for itself, as Node would.
      rmSync(partial, { force: true })
    }
    return stripped
  }
}

registerHooks({
  resolve (specifier, context, nextResolve) {
    const parent = context.parentURL
    if (parent !== undefined && parent.startsWith('file:') && parent.endsWith('.ts') && RELATIVE_JS.test(specifier)) {
      const asWritten = new URL(specifier, parent)
      if (!existsSync(asWritten)) {
        const typescript = new URL(specifier.slice(0, -'.js'.length) + '.ts', parent)
        if (existsSync(typescript)) return nextResolve(typescript.href, context)
      }
    }
    return nextResolve(specifier, context)
  },
  load (url, context, nextLoad) {
    const loaded = nextLoad(url, context)
    if (loaded.format !== 'module-typescript' || url.includes('/node_modules/') || loaded.source === undefined || loaded.source === null) return loaded
    const source = typeof loaded.source === 'string' ? loaded.source : Buffer.from(loaded.source as Uint8Array).toString('utf8')
    return { ...loaded, format: 'module', source: strippedSource(url, source) }
  }
})
