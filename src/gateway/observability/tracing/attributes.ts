// The gateway's own span attributes (the standard HTTP, URL and network ones come from
// @opentelemetry/semantic-conventions), named once so spans, tests and docs/tracing.md agree. Only
// identifiers and decisions: never a key, its digest or any header value.
export const ATTR_REQUEST_ID = 'petstore.request_id'
/** The consumer a key belongs to (docs/decisions.md §10); absent for anonymous requests. */
export const ATTR_CONSUMER_ID = 'petstore.consumer.id'
/** The plan name, or `anonymous`. */
export const ATTR_PLAN = 'petstore.plan'
/** `ok`, `rate_limited`, `key_banned`, or `unavailable` (STORE_ON_ERROR=closed while the store fails). */
export const ATTR_RATELIMIT_OUTCOME = 'petstore.ratelimit.outcome'
export const ATTR_RATELIMIT_WINDOW = 'petstore.ratelimit.window'
export const ATTR_RATELIMIT_REMAINING = 'petstore.ratelimit.remaining'
/** Seconds, as the 429's `Retry-After` says. */
export const ATTR_RATELIMIT_RETRY_AFTER = 'petstore.ratelimit.retry_after'
export const ATTR_RATELIMIT_BAN_STARTED = 'petstore.ratelimit.ban_started'
/** `memory`, `redis`, `sentinel` or `cluster` (LimiterStore.kind). */
export const ATTR_RATELIMIT_STORE = 'petstore.ratelimit.store'
/**
 * Where the decision came from (RateLimitDecision.source): `store` (the grant call it waited for),
 * `grant` (units this process held, no call), `fallback` (STORE_ON_ERROR) or `ban-cache`.
 */
export const ATTR_RATELIMIT_SOURCE = 'petstore.ratelimit.source'
/** True when the upstream connection was opened for this request (false: a kept-alive one was reused). */
export const ATTR_UPSTREAM_NEW_CONNECTION = 'petstore.upstream.new_connection'
