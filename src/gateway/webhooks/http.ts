// One delivery attempt over HTTP, safe by default: no redirect followed (a 3xx is a failed attempt,
// so an endpoint cannot send the gateway's signed events, or its requests, somewhere the config does
// not name), a short connect timeout and a short response timeout (headers and body), at most
// `maxResponseBytes` of the response read before the connection is dropped. The outcome names a
// status or an error code only: never a header, a body or a secret.
import { Agent, request } from 'undici'
import type { WebhookHeaders } from './sign.js'

export const DEFAULT_CONNECT_TIMEOUT_MS = 3_000
export const DEFAULT_RESPONSE_TIMEOUT_MS = 10_000
export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024

export interface HttpOptions {
  connectTimeoutMs?: number
  responseTimeoutMs?: number
  maxResponseBytes?: number
}

export type AttemptOutcome = { readonly ok: true, readonly status: number } | { readonly ok: false, readonly error: string }

export interface WebhookSender {
  send: (url: string, headers: WebhookHeaders, body: string) => Promise<AttemptOutcome>
  /**
   * Drops every connection, an attempt still in flight included (its send resolves as a failed attempt): a closing
   * gateway has already waited what it will for its round (plugin.ts CLOSE_WAIT_MS) and closed its queue, so the job
   * is not settled and stays pending; a receiver that holds the request must not hold the close for its response timeout.
   */
  close: () => Promise<void>
}

export function createSender (opts: HttpOptions = {}): WebhookSender {
  const responseTimeout = opts.responseTimeoutMs ?? DEFAULT_RESPONSE_TIMEOUT_MS
  const maxBytes = opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES
  const agent = new Agent({
    connect: { timeout: opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS },
    headersTimeout: responseTimeout,
    bodyTimeout: responseTimeout,
    keepAliveTimeout: 4_000
  })
  return {
    async send (url, headers, body) {
      try {
        // undici's request never follows a redirect: a 3xx comes back as it is.
        const response = await request(url, { method: 'POST', headers: { ...headers }, body, dispatcher: agent, signal: AbortSignal.timeout(responseTimeout * 2) })
        await response.body.dump({ limit: maxBytes }).catch(() => undefined)
        const status = response.statusCode
        if (status >= 200 && status < 300) return { ok: true, status }
        return { ok: false, error: status >= 300 && status < 400 ? `status ${status} (redirects are not followed)` : `status ${status}` }
      } catch (err) {
        const code = (err as { code?: unknown }).code
        return { ok: false, error: typeof code === 'string' ? code : err instanceof Error ? err.name : 'error' }
      }
    },
    async close () { await agent.destroy() }
  }
}
