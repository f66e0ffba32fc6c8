// Holds the config snapshot in force and hands each request the one it reads for its whole life,
// so a reload (one reference swap) never mixes two configs inside a request.
//
// No readiness check here: the config in force is always a valid one (the first load must succeed
// for the gateway to start, a reload keeps the last good one), and failing readiness on a rejected reload would take
// every instance of a fleet out of service at once for one bad ConfigMap. A rejected reload is
// logged, counted (gateway_config_reloads_total) and kept as `configReloader.lastFailure`.
import fp from 'fastify-plugin'
import type { ConfigSnapshot } from './types.js'

export interface ConfigHolder {
  /** The snapshot in force; reading it before the first one is installed is a bug, and throws. */
  readonly current: ConfigSnapshot
  /** Installs a new snapshot for every request that starts from now on. */
  swap: (next: ConfigSnapshot) => void
}

declare module 'fastify' {
  interface FastifyInstance {
    gatewayConfig: ConfigHolder
  }
  interface FastifyRequest {
    /** The config this request was started with (the one in force, for a request no hook has seen yet). */
    readonly snapshot: ConfigSnapshot
    /** The snapshot pinned by the first onRequest hook; null before it ran. */
    pinnedSnapshot: ConfigSnapshot | null
  }
}

/** A holder with `initial` in force, or empty until the provider's first load is swapped in (reload.ts). */
export function createConfigHolder (initial?: ConfigSnapshot): ConfigHolder {
  let current = initial
  return {
    get current () {
      if (current === undefined) throw new Error('no config is in force yet: the first load has not been swapped in')
      return current
    },
    swap (next) { current = next }
  }
}

export const configPlugin = fp<{ holder: ConfigHolder }>(async function configPlugin (app, { holder }) {
  app.decorate('gatewayConfig', holder)
  app.decorateRequest('pinnedSnapshot', null)
  app.decorateRequest('snapshot', {
    getter (this: { pinnedSnapshot: ConfigSnapshot | null }) { return this.pinnedSnapshot ?? holder.current }
  })
  app.addHook('onRequest', function pinSnapshot (request, _reply, done) {
    request.pinnedSnapshot = holder.current
    done()
  })
}, { name: 'gateway-config' })
