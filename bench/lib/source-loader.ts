// How a bench starts Node on a checkout's TypeScript: its own module (node built-ins only), so the measured
// children that need it (account-cost, memory-store-cpu, zipf-calls) load nothing else with it.
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'

/**
 * How Node runs a TypeScript entry from its checkout: as the sources run unbuilt there — on Node's type
 * stripping with the checkout's resolve hook (src/ts-resolve.ts), the same code the built image runs — or,
 * for an older checkout without that hook (a BENCH_BASELINE from before it), through tsx as it then ran.
 */
export function sourceLoaderArgs (entry: string): string[] {
  let dir = dirname(entry)
  while (!existsSync(join(dir, 'package.json')) && dirname(dir) !== dir) dir = dirname(dir)
  const hook = join(dir, 'src', 'ts-resolve.ts')
  return existsSync(hook) ? ['--import', pathToFileURL(hook).href] : ['--import', 'tsx']
}

