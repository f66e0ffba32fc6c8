// What the store metrics read from a limiter, declared here so metrics depend on no limiter code:
// the limiter plugin supplies it (app.limiterStatus). Every member is a cheap read, safe to call
// on each scrape.
export interface LimiterStatus {
  /** Store errors since start (timeouts, connection errors). */
  storeErrors: () => number
  /** True while a store circuit breaker is open and the fallback policy is in force. */
  fallbackActive: () => boolean
  /** Requests admitted while the store did not answer, by kind (reserve, allowance), since start. */
  outageAdmissions?: () => { readonly reserve: number, readonly allowance: number }
  /** Bans in force in the shared store (all processes) at the last background count; undefined before the first. */
  bannedKeys: () => number | undefined
}
