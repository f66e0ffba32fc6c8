// Holds the config snapshot in force and hands each request the one it reads for its whole life,
// so a reload (one reference swap) never mixes two configs inside a request.
import fp from 'fastify-plugin'
import type { ConfigSnapshot } from './types.js'

export interface ConfigHolder {
  readonly current: ConfigSnapshot
  /** Installs a new snapshot for every request that starts from now on. */
  swap: (next: ConfigSnapshot) => void
}

declare module 'fastify' {
  interface FastifyInstance {
    gatewayConfig: ConfigHolder
  }
  interface FastifyRequest {
    /** The config this request was started with. */
    snapshot: ConfigSnapshot
  }
}

export function createConfigHolder (initial: ConfigSnapshot): ConfigHolder {
  let current = initial
  return {
    get current () { return current },
    swap (next) { current = next }
  }
}

export const configPlugin = fp<{ holder: ConfigHolder }>(async function configPlugin (app, { holder }) {
  app.decorate('gatewayConfig', holder)
  if (app.hasDecorator('health')) {
    app.health.checks.set('config', async () => {
      if (!holder.current) throw new Error('no config snapshot loaded')
    })
  }
  app.decorateRequest('snapshot', null as unknown as ConfigSnapshot)
  app.addHook('onRequest', function readSnapshot (request, _reply, done) {
    request.snapshot = holder.current
    done()
  })
}, { name: 'gateway-config' })
