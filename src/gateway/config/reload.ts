// Live config reload: re-reads CONFIG_DIR on a file change (watch), on SIGHUP (server.ts) or on
// POST /admin/reload, and swaps the snapshot only when the whole new config is valid. A bad
// config is rejected whole; the last good one stays in force. Every outcome is logged and counted.
import fp from 'fastify-plugin'
import { logExpiringKeys } from '../admin/key-expiry.js'
import { assertNoDemoKeys } from './demo-keys.js'
import { ConfigError, loadConfigDir } from './loader.js'
import { watchDirectory } from './watch.js'

export type ReloadResult =
  | { readonly ok: true, readonly changed: boolean, readonly version: string, readonly keys: number }
  | { readonly ok: false, readonly problems: readonly string[] }

export interface ConfigReloader {
  readonly dir: string
  /** Reloads now; `trigger` says why (watch, SIGHUP, admin) in the log line. */
  reload: (trigger: string) => ReloadResult
}

export interface ReloadOptions {
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

  function reload (trigger: string): ReloadResult {
    let result: ReloadResult
    try {
      const next = loadConfigDir(opts.dir)
      if (opts.production === true) assertNoDemoKeys(next)
      const changed = next.version !== holder.current.version
      if (changed) holder.swap(next)
      result = { ok: true, changed, version: holder.current.version, keys: holder.current.keysByDigest.size }
      app.log.info({ trigger, changed, version: result.version, keys: result.keys }, changed ? 'config reloaded' : 'config unchanged')
      logExpiringKeys(app.log, holder.current, app.clock())
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err
      result = { ok: false, problems: err.problems }
      app.log.error({ trigger, problems: err.problems, keptVersion: holder.current.version }, 'config reload rejected; the last good config stays in force')
    }
    if (app.hasDecorator('metrics')) app.metrics.configReloads.inc({ result: result.ok ? 'success' : 'failure' })
    return result
  }

  app.decorate('configReloader', { dir: opts.dir, reload })
  logExpiringKeys(app.log, holder.current, app.clock())
  if (opts.watch !== false) {
    const stop = watchDirectory(opts.dir, () => reload('watch'), opts.debounceMs)
    app.addHook('onClose', async () => stop())
  }
}, { name: 'gateway-config-reload', dependencies: ['gateway-config', 'gateway-clock'] })
