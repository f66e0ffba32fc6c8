// The matched route pattern of a request, read once. Fastify's `request.routeOptions` is a getter
// that builds a 13-field object on every read; lifecycle, metrics and the request log each need the
// pattern, so the first of them reads it and the others find it on the request.
import type { FastifyRequest } from 'fastify'
import { UNMATCHED_ROUTE } from '../../shared/labels.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The route pattern (or UNMATCHED_ROUTE) once read by routeUrlOf; null before. */
    routeUrl: string | null
  }
}

export function routeUrlOf (request: FastifyRequest): string {
  let url = request.routeUrl
  // Not a string: not read yet, or a request of an app that never decorated the field.
  if (typeof url !== 'string') {
    url = request.routeOptions.url ?? UNMATCHED_ROUTE
    request.routeUrl = url
  }
  return url
}
