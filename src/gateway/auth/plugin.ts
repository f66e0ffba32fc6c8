// Authentication in two hooks around the limiter: `authenticate` finds the key record (or notes
// why there is none) so the limiter can count the request against the key or the client IP;
// `requireKey` then answers 401 for what failed. Routes marked `config.public` skip the 401.
import fp from 'fastify-plugin'
import { gatewayErrors, type ApiError } from '../errors.js'
import type { KeyRecord } from '../config/types.js'
import { parseBearer } from './bearer.js'
import { createKeyLookup } from './key-cache.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The key record of a valid, enabled key; null otherwise. */
    consumer: KeyRecord | null
    /** Why `consumer` is null: which 401 `requireKey` will answer. */
    authFailure: AuthFailure | null
  }
  interface FastifyContextConfig {
    /** Served without a key (limited by the anonymous policy). */
    public?: boolean
  }
}

export type AuthFailure = 'missing' | 'invalid' | 'disabled'

// Built only when a 401 is actually answered: most keyless requests of a flood end as 429, and
// public routes never answer 401, so no Error (and its stack trace) is made for them.
const UNAUTHORIZED: Record<AuthFailure, () => ApiError> = {
  missing: gatewayErrors.missingKey,
  invalid: gatewayErrors.invalidKey,
  disabled: gatewayErrors.disabledKey
}

export const authenticate = fp(async function authenticate (app) {
  app.decorateRequest('consumer', null)
  app.decorateRequest('authFailure', null)
  const lookup = createKeyLookup()
  app.addHook('onRequest', function identifyKey (request, _reply, done) {
    const parsed = parseBearer(request.headers.authorization)
    if (parsed.kind === 'token') {
      const record = lookup(request.snapshot, parsed.token)
      if (record === undefined) request.authFailure = 'invalid'
      else if (record.disabled) request.authFailure = 'disabled'
      else request.consumer = record
    } else {
      request.authFailure = parsed.kind === 'missing' ? 'missing' : 'invalid'
    }
    done()
  })
}, { name: 'gateway-authenticate', dependencies: ['gateway-config'] })

export const requireKey = fp(async function requireKey (app) {
  app.addHook('onRequest', function rejectWithoutKey (request, _reply, done) {
    if (request.consumer === null && request.routeOptions.config.public !== true && request.authFailure !== null) {
      done(UNAUTHORIZED[request.authFailure]())
      return
    }
    done()
  })
}, { name: 'gateway-require-key', dependencies: ['gateway-authenticate'] })
