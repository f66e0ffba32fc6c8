// Where every config the gateway runs on comes from — the first one at start-up and each reload
// alike, as envoyproxy/ratelimit's provider hands its first config through the same update path as
// every later one. A load reads and validates CONFIG_DIR off the event loop (worker-loader.ts; the
// first, before anything is served, on the calling thread when the files are small), then applies
// what holds for the process as a whole (no demo key in production), so a snapshot it returns is one
// the gateway may swap in; anything else is a ConfigError naming every problem.
import { assertNoDemoKeys } from './demo-keys.js'
import type { ConfigSnapshot } from './types.js'
import { createConfigParser, type WorkerLoadOptions } from './worker-loader.js'

export interface ProviderOptions extends WorkerLoadOptions {
  dir: string
  /** NODE_ENV=production: the demo keys are refused. */
  production?: boolean
  /** The gateway's clock, Unix ms (each snapshot's `loadedAt`). */
  now: () => number
}

export interface ConfigProvider {
  readonly dir: string
  /** The config in `dir` now, validated; a ConfigError naming every problem otherwise. One load at a time. */
  load: () => Promise<ConfigSnapshot>
  /** As `load`, before the process serves anything (its start, a one-off check): a small config on this thread. */
  loadBeforeServing: () => Promise<ConfigSnapshot>
  /** Starts the parse worker now instead of at the next load. */
  ready: () => Promise<void>
  /** Stops the parse worker until the next load. */
  release: () => void
  close: () => Promise<void>
}

export function createConfigProvider (opts: ProviderOptions): ConfigProvider {
  const { dir, production, ...parserOptions } = opts
  const parser = createConfigParser(parserOptions)
  const checked = (snapshot: ConfigSnapshot): ConfigSnapshot => {
    if (production === true) assertNoDemoKeys(snapshot)
    return snapshot
  }
  return {
    dir,
    async load () { return checked(await parser.load(dir)) },
    async loadBeforeServing () { return checked(await parser.loadBeforeServing(dir)) },
    ready: parser.ready,
    release: parser.release,
    close: parser.close
  }
}

/** One load before anything is served, then the worker (if a big config started one) is stopped: how `config check` and the primary of GATEWAY_WORKERS validate a directory. */
export async function loadConfigOnce (opts: ProviderOptions): Promise<ConfigSnapshot> {
  const provider = createConfigProvider(opts)
  try {
    return await provider.loadBeforeServing()
  } finally {
    await provider.close()
  }
}
