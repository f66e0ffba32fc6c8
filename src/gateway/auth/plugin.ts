// Authentication in two hooks around the limiter: `authenticate` finds the key record (or notes
// why there is none) so the limiter can count the request against the consumer or the client IP;
// `requireKey` then answers 401 for what failed, and 403 for a method outside the key's scopes
// (after the limiter, so such a request counts against the consumer like any authenticated one).
// Routes marked `config.public` skip both.
import fp from 'fastify-plugin'
import { gatewayErrors, type ApiError } from '../../interface/errors.js'
import type { KeyRecord, Scope } from '../config/types.js'
import { parseBearer } from './bearer.js'
import { createKeyLookup } from './key-cache.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The key record of a valid, enabled, unexpired key; null otherwise. */
    consumer: KeyRecord | null
    /** Why `consumer` is null: which 401 `requireKey` will answer. */
    authFailure: AuthFailure | null
    /** The record of a presented key that is disabled or expired (never logged; names the expiry in the 401). */
    refusedKey: KeyRecord | null
  }
  interface FastifyContextConfig {
    /** Served without a key, and then outside the anonymous limit (limiter/plugin.ts). */
    public?: boolean
  }
}

export type AuthFailure = 'missing' | 'invalid' | 'disabled' | 'expired'

export const EXPIRES_HEADER = 'x-api-key-expires'

/** `read`: GET and HEAD; `write`: every other method. */
export function scopeOf (method: string): Scope {
  return method === 'GET' || method === 'HEAD' ? 'read' : 'write'
}

// Built only when a 401 is actually answered: most keyless requests of a flood end as 429, and
// public routes never answer 401, so no Error (and its stack trace) is made for them.
const UNAUTHORIZED: Record<AuthFailure, (refused: KeyRecord | null) => ApiError> = {
  missing: gatewayErrors.missingKey,
  invalid: gatewayErrors.invalidKey,
  disabled: gatewayErrors.disabledKey,
  expired: (refused) => gatewayErrors.keyExpired(refused?.expiresAt ?? 0)
}

export const authenticate = fp(async function authenticate (app) {
  app.decorateRequest('consumer', null)
  app.decorateRequest('authFailure', null)
  app.decorateRequest('refusedKey', null)
  const lookup = createKeyLookup()
  app.addHook('onRequest', function identifyKey (request, reply, done) {
    const parsed = parseBearer(request.headers.authorization)
    if (parsed.kind === 'token') {
      const record = lookup(request.snapshot, parsed.token)
      if (record === undefined) {
        request.authFailure = 'invalid'
      } else if (record.disabled) {
        request.authFailure = 'disabled'
        request.refusedKey = record
      } else if (record.expiresAt !== undefined && app.clock() >= record.expiresAt) {
        // Compared at each request with the gateway's clock: a key stops working the instant it
        // expires, with no reload. Like any invalid key, it then counts against the client address.
        request.authFailure = 'expired'
        request.refusedKey = record
      } else {
        request.consumer = record
        if (record.expiresHeader !== undefined) reply.header(EXPIRES_HEADER, record.expiresHeader)
      }
    } else {
      request.authFailure = parsed.kind === 'missing' ? 'missing' : 'invalid'
    }
    done()
  })
}, { name: 'gateway-authenticate', dependencies: ['gateway-config', 'gateway-clock'] })

export const requireKey = fp(async function requireKey (app) {
  app.addHook('onRequest', function rejectWithoutKey (request, _reply, done) {
    const consumer = request.consumer
    const scope = scopeOf(request.method)
    // A key within its scopes passes without reading routeOptions (a getter that builds an object).
    if (consumer !== null && consumer.scopes.includes(scope)) {
      done()
      return
    }
    if (request.routeOptions.config.public === true) {
      done()
      return
    }
    if (consumer === null) {
      done(request.authFailure === null ? undefined : UNAUTHORIZED[request.authFailure](request.refusedKey))
      return
    }
    done(gatewayErrors.insufficientScope(request.method, scope))
  })
}, { name: 'gateway-require-key', dependencies: ['gateway-authenticate'] })
