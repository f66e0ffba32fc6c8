// The gateway's wall clock as a decorator, so time-dependent behaviour (sunset → 410) is tested with
// an injected clock instead of the real date.
import fp from 'fastify-plugin'

/** Unix milliseconds now. */
export type Clock = () => number

declare module 'fastify' {
  interface FastifyInstance {
    clock: Clock
  }
}

export const clockPlugin = fp<{ now?: Clock | undefined }>(async function clockPlugin (app, opts) {
  app.decorate('clock', opts.now ?? Date.now)
}, { name: 'gateway-clock' })
