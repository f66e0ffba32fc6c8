// Lets Node run the TypeScript sources as they are, on its own type stripping, with no compiler and no
// loader of ours beyond this resolve hook: stripping only blanks the types out, so every line and column
// stays where it is (V8's coverage maps straight onto the .ts files). The sources import each other as
// './x.js' (tsconfig NodeNext: what `npm run build` emits), and Node does not map a '.js' that is not
// there to the '.ts' beside it; this hook does, for relative imports made from a .ts file only (packages
// resolve untouched). Preloaded with `--import` by every way the sources run unbuilt: `npm start` and
// the other package.json scripts, the processes start.ts supervises, the config parse worker, the
// benches' processes and tap's test processes ("tap" `node-arg`); the built image runs dist/ without it.
import { existsSync } from 'node:fs'
import { registerHooks } from 'node:module'

const RELATIVE_JS = /^\.{1,2}\/.*\.js$/

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
  }
})
