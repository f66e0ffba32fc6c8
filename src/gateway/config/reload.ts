// Live config reload: re-reads CONFIG_DIR on a file change (watch), on SIGHUP (server.ts) or on
// POST /admin/reload, and swaps the snapshot only when the whole new config is valid. A bad
// config is rejected whole; the last good one stays in force. Every outcome is logged and counted.
// The reading, parsing and validating run in a worker thread (worker-loader.ts), so a reload never
// holds up the requests being served; reloads run one at a time, and requests for a reload that
// arrive while one runs share the single reload that follows it.
import fp from 'fastify-plugin'
import { logExpiringKeys } from './key-expiry.js'
import { assertNoDemoKeys } from './demo-keys.js'
import { ConfigError } from './loader.js'
import { watchDirectory } from './watch.js'
import { createConfigParser, type WorkerLoadOptions } from './worker-loader.js'

export type ReloadResult =
  | { readonly ok: true, readonly changed: boolean, readonly version: string, readonly keys: number }
  | { readonly ok: false, readonly problems: readonly string[] }

export interface ReloadFailure {
  /** Unix ms of the rejected reload. */
  readonly at: number
  readonly trigger: string
  readonly problems: readonly string[]
}

export interface ConfigReloader {
  readonly dir: string
  /** Reloads now; `trigger` says why (watch, SIGHUP, admin) in the log line. */
  reload: (trigger: string) => Promise<ReloadResult>
  /** The last rejected reload, or null when the last reload succeeded (or none ran). */
  readonly lastFailure: ReloadFailure | null
  /** Starts the parse worker now (it starts with the first reload otherwise: ~70 ms built, up to seconds under tsx). */
  ready: () => Promise<void>
}

export interface ReloadOptions extends WorkerLoadOptions {
  dir: string
  /** Watch the directory for changes (default true). */
  watch?: boolean
  debounceMs?: number
  /** Refuse the demo keys, as at start-up with NODE_ENV=production. */
  production?: boolean
}

declare module 'fastify' {
  interface FastifyInstance {
    configReloader: ConfigReloader
  }
}

export const reloadPlugin = fp<ReloadOptions>(async function reloadPlugin (app, opts) {
  const holder = app.gatewayConfig
  const { dir, watch, debounceMs, production, ...loadOptions } = opts
  let lastFailure: ReloadFailure | null = null
  const parser = createConfigParser(loadOptions)
  app.addHook('onClose', async () => { await parser.close() })

  async function reloadNow (trigger: string): Promise<ReloadResult> {
    let result: ReloadResult
    try {
      const next = await parser.load(dir)
      if (production === true) assertNoDemoKeys(next)
      const changed = next.version !== holder.current.version
      if (changed) holder.swap(next)
      result = { ok: true, changed, version: holder.current.version, keys: holder.current.keysByDigest.size }
      lastFailure = null
      app.log.info({ trigger, changed, version: result.version, keys: result.keys }, changed ? 'config reloaded' : 'config unchanged')
      logExpiringKeys(app.log, holder.current, app.clock())
    } catch (err) {
      // A worker that crashed or was stopped is a failed reload too: the last good config stays.
      const problems = err instanceof ConfigError ? err.problems : [`config: reload failed: ${err instanceof Error ? err.message : String(err)}`]
      result = { ok: false, problems }
      lastFailure = { at: Date.now(), trigger, problems }
      app.log.error({ trigger, problems, keptVersion: holder.current.version }, 'config reload rejected; the last good config stays in force')
    }
    if (app.hasDecorator('metrics')) app.metrics.configReloads.inc({ result: result.ok ? 'success' : 'failure' })
    return result
  }

  let running: Promise<ReloadResult> | undefined
  let queued: Promise<ReloadResult> | undefined
  /** One reload at a time; every request made while one runs is answered by the next one, which reads the files afresh. */
  async function reload (trigger: string): Promise<ReloadResult> {
    if (running === undefined) {
      running = reloadNow(trigger).finally(() => { running = undefined })
      return await running
    }
    queued ??= running.catch(() => undefined).then(async () => {
      queued = undefined
      return await reload(trigger)
    })
    return await queued
  }

  app.decorate('configReloader', {
    dir,
    reload,
    get lastFailure () { return lastFailure },
    ready: parser.ready
  })
  logExpiringKeys(app.log, holder.current, app.clock())
  if (watch !== false) {
    const stop = watchDirectory(dir, () => {
      reload('watch').catch((err: unknown) => app.log.error({ err }, 'config reload failed'))
    }, debounceMs)
    app.addHook('onClose', async () => stop())
  }
}, { name: 'gateway-config-reload', dependencies: ['gateway-config', 'gateway-clock'] })
