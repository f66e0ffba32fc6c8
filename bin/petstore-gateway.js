#!/usr/bin/env node
// `petstore-gateway` (package.json "bin"): runs the compiled CLI from dist/ after `npm run build`,
// and the TypeScript source on Node's type stripping (with the sources' resolve hook, src/ts-resolve.ts) in
// a checkout that has not been built, so `npx petstore-gateway` works straight after `npm ci`.
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const built = join(root, 'dist', 'cli', 'main.js')
let entry = built
if (!existsSync(built)) {
  await import(pathToFileURL(join(root, 'src', 'ts-resolve.ts')).href)
  entry = join(root, 'src', 'cli', 'main.ts')
}
const { run } = await import(pathToFileURL(entry).href)
process.exitCode = await run(process.argv.slice(2))
