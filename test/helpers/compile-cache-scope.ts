// Loaded in every test process tap starts (tap's `test-env` NODE_OPTIONS, after processinfo-scope.ts): Node's
// compile cache for the packages a test process loads, never for the code whose coverage it counts.
//
// Compiling what a test file imports is most of a small file's cost: fastify, undici (1.1 MB), ajv, yaml,
// ioredis and the rest are about 3 MB of JavaScript, compiled afresh in each of the suite's 200-odd test
// processes. Node can keep V8's compiled code on disk and reuse it (the children already do: processes.ts),
// but a function V8 reads from that cache carries no block counters, so V8's coverage of our own files
// would lose lines and branches (measured: ts-resolve.ts 96.3 → 73.2 % of lines). Node has no switch to
// cache some modules and not others; it reuses an entry only when the module's text is the text it was
// made from. So while coverage is on, each of our modules gets one comment line at its end naming this
// process: its text is then new to the cache in every process, V8 compiles it with coverage, and the
// packages' entries are reused. Nothing moves: the line comes after the last one, every offset and line
// V8 counts stays where it was. Without coverage (`tap --disable-coverage`) our modules are cached too.
//
// The cache is this directory under the OS's temp dir, the test processes' own: the children's
// (processes.ts) holds our modules as they really are, and sharing one would make the two rewrite each
// other's entries. Node checks every entry against the module's text; a changed package is compiled afresh.
import { enableCompileCache, registerHooks } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
// Our TypeScript hook first, so the hook below sees the stripped JavaScript: the last hook registered
// runs first, and its text (not the .ts) is what Node compiles and caches.
import '../../src/ts-resolve.ts'

const COVERAGE_ON = process.env._TAPJS_PROCESSINFO_COVERAGE_ === '1'
const OWN_MARKER = `\n// compiled in test process ${process.pid}, with coverage\n`

enableCompileCache(join(tmpdir(), 'petstore-gateway-compile-cache-tests'))

if (COVERAGE_ON) {
  registerHooks({
    load (url, context, nextLoad) {
      const loaded = nextLoad(url, context)
      if (loaded.format !== 'module' || !url.startsWith('file:') || url.includes('/node_modules/') || loaded.source === undefined || loaded.source === null) return loaded
      const source = typeof loaded.source === 'string' ? loaded.source : Buffer.from(loaded.source as Uint8Array).toString('utf8')
      return { ...loaded, source: `${source}${OWN_MARKER}` }
    }
  })
}

// The processes a test starts (cwd elsewhere) never look for this file.
process.env.NODE_OPTIONS = (process.env.NODE_OPTIONS ?? '').replace(/"?--import[= ]\S*compile-cache-scope\.ts"?/g, '').replace(/\s+/g, ' ').trim()
