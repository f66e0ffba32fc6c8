// The limiter decision's span, from two hooks registered on either side of the limiter's onRequest
// hook (Fastify runs onRequest hooks in registration order), so the limiter itself knows nothing of
// tracing. The span ends in the second hook, or — when the limiter answers 429 or 503 by throwing —
// in the tracing plugin's onError hook. With tracing off neither registers a hook.
import fp from 'fastify-plugin'

export const limiterSpanStart = fp(async function limiterSpanStart (app) {
  const hooks = app.tracingHooks
  if (hooks !== undefined) app.addHook('onRequest', hooks.startLimiterSpan)
}, { name: 'gateway-tracing-limiter-start', dependencies: ['gateway-tracing'] })

export const limiterSpanEnd = fp(async function limiterSpanEnd (app) {
  const hooks = app.tracingHooks
  if (hooks !== undefined) app.addHook('onRequest', hooks.endLimiterSpan)
}, { name: 'gateway-tracing-limiter-end', dependencies: ['gateway-tracing', 'gateway-limiter'] })
