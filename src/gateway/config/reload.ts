// The one config path of a gateway that runs on a config directory: provider → validate → swap.
// The first load (at registration: the gateway does not start without a valid config) and every
// reload after it — on a change once the directory is quiet (watch.ts), on SIGHUP (server.ts), on
// POST /admin/reload — go through the same load (provider.ts: read and validate in a worker thread —
// the first on this thread when the files are small, nothing being served yet — and the production
// rules) and the same swap. A bad config is rejected whole: at start-up the
// problems are thrown to the caller; on a reload the last good config stays in force. Every
// reload's outcome is logged and counted. Reloads run one at a time, and requests for a reload that
// arrive while one runs share the single reload that follows it.
import fp from 'fastify-plugin'
import { logExpiringKeys } from './key-expiry.js'
import { ConfigError } from './loader.js'
import { createConfigProvider } from './provider.js'
import { watchDirectory } from './watch.js'
import type { WorkerLoadOptions } from './worker-loader.js'
import type { ConfigSnapshot } from './types.js'

export type ReloadResult =
  | { readonly ok: true, readonly changed: boolean, readonly version: string, readonly keys: number }
  | { readonly ok: false, readonly problems: readonly string[] }

export interface ReloadFailure {
  /** Unix ms of the rejected reload (the gateway clock). */
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
  /** Starts the parse worker now (the first load starts none for a small config; it is stopped after it and started again by the next load). */
  ready: () => Promise<void>
}

export interface ReloadOptions extends WorkerLoadOptions {
  dir: string
  /** Reload when the directory changes (default true); SIGHUP and the admin API reload either way. */
  watch?: boolean
  /** CONFIG_QUIET_MS: a change is applied once the directory has been quiet this long (watch.ts). */
  quietMs?: number
  /** Refuse the demo keys (NODE_ENV=production). */
  production?: boolean
}

declare module 'fastify' {
  interface FastifyInstance {
    configReloader: ConfigReloader
  }
}

function problemsOf (err: unknown, what: 'load' | 'reload'): readonly string[] {
  // A worker that crashed or was stopped is a failed load too.
  return err instanceof ConfigError ? err.problems : [`config: ${what} failed: ${err instanceof Error ? err.message : String(err)}`]
}

export const reloadPlugin = fp<ReloadOptions>(async function reloadPlugin (app, opts) {
  const holder = app.gatewayConfig
  const { dir, watch, quietMs, production, ...loadOptions } = opts
  const provider = createConfigProvider({ ...loadOptions, dir, production, now: app.clock })
  app.addHook('onClose', async () => { await provider.close() })

  let inForce: string | undefined
  /** The one path: load (provider: read and validate), then swap when the version differs from the one in force. */
  async function loadAndSwap (load: () => Promise<ConfigSnapshot>): Promise<boolean> {
    const next = await load()
    const changed = next.version !== inForce
    if (changed) {
      holder.swap(next)
      inForce = next.version
    }
    return changed
  }

  // The first load, through the same path (nothing is in force yet, nothing served): no gateway without a valid config.
  try {
    await loadAndSwap(provider.loadBeforeServing)
  } catch (err) {
    await provider.close()
    throw err instanceof ConfigError ? err : new ConfigError([...problemsOf(err, 'load')])
  }
  provider.release()
  app.log.info({ configDir: dir, version: holder.current.version, keys: holder.current.keysByDigest.size, plans: holder.current.plans.size }, 'config loaded')
  logExpiringKeys(app.log, holder.current, app.clock())

  let lastFailure: ReloadFailure | null = null
  async function reloadNow (trigger: string): Promise<ReloadResult> {
    let result: ReloadResult
    try {
      const changed = await loadAndSwap(provider.load)
      result = { ok: true, changed, version: holder.current.version, keys: holder.current.keysByDigest.size }
      lastFailure = null
      app.log.info({ trigger, changed, version: result.version, keys: result.keys }, changed ? 'config reloaded' : 'config unchanged')
      logExpiringKeys(app.log, holder.current, app.clock())
    } catch (err) {
      const problems = problemsOf(err, 'reload')
      result = { ok: false, problems }
      lastFailure = { at: app.clock(), trigger, problems }
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
    ready: provider.ready
  })
  if (watch !== false) {
    const stop = watchDirectory(dir, () => {
      reload('watch').catch((err: unknown) => app.log.error({ err }, 'config reload failed'))
    }, quietMs)
    app.addHook('onClose', async () => stop())
  }
}, { name: 'gateway-config-reload', dependencies: ['gateway-config', 'gateway-clock'] })
