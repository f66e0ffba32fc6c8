// Lets tap run the TypeScript sources on Node's own type stripping instead of a compiler: stripping
// only blanks the types out, so every line and column stays where it is and V8's coverage maps
// straight onto the .ts files. The sources import each other as './x.js' (tsconfig NodeNext: what
// `npm run build` emits), and Node does not map a '.js' that is not there to the '.ts' beside it;
// this hook does, for relative imports made from a .ts file only (packages resolve untouched).
// Preloaded into every test process by package.json's "tap" `node-arg`; docs/development.md.
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
