// What Fastify's router refuses before any hook — a path parameter over its maxParamLength (100), a
// URL with bad percent-encoding — it answers in its own shape by default, with the whole path echoed
// (a 5,000-character id came back whole in a 414). The admin app answers them in the Error shape
// instead, as the public app does (edge/request-screen.ts), without repeating the path: nothing runs
// for such a request, so there is nothing to guard or count.
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { gatewayErrors, sendApiError } from '../../interface/errors.js'

/** Fastify's `frameworkErrors` for the admin app: `400 invalid_parameter`. */
export function adminFrameworkErrors (error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  sendApiError(reply, error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? gatewayErrors.paramTooLong() : gatewayErrors.badUrl())
}
