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
    /** Why `consumer` is null: the 401 that `requireKey` will answer. */
    authFailure: ApiError | null
  }
  interface FastifyContextConfig {
    /** Served without a key (limited by the anonymous policy). */
    public?: boolean
  }
}

export const authenticate = fp(async function authenticate (app) {
  app.decorateRequest('consumer', null)
  app.decorateRequest('authFailure', null)
  const lookup = createKeyLookup()
  app.addHook('onRequest', function identifyKey (request, _reply, done) {
    const parsed = parseBearer(request.headers.authorization)
    if (parsed.kind === 'token') {
      const record = lookup(request.snapshot, parsed.token)
      if (record === undefined) request.authFailure = gatewayErrors.invalidKey()
      else if (record.disabled) request.authFailure = gatewayErrors.disabledKey()
      else request.consumer = record
    } else {
      request.authFailure = parsed.kind === 'missing' ? gatewayErrors.missingKey() : gatewayErrors.invalidKey()
    }
    done()
  })
}, { name: 'gateway-authenticate', dependencies: ['gateway-config'] })

export const requireKey = fp(async function requireKey (app) {
  app.addHook('onRequest', function rejectWithoutKey (request, _reply, done) {
    if (request.consumer === null && request.routeOptions.config.public !== true && request.authFailure !== null) {
      done(request.authFailure)
      return
    }
    done()
  })
}, { name: 'gateway-require-key', dependencies: ['gateway-authenticate'] })
