// Label values that stand for "none": written in log lines, metric labels and rate-limit policy names
// of both services, and matched by dashboards and alerts, so each is spelled once.

/** The `route` of every request that matched no route (metrics label, log field). */
export const UNMATCHED_ROUTE = 'unmatched'

/** The `plan` of a request without a valid key: metrics label, log field, the limiter's policy name. */
export const ANONYMOUS_PLAN = 'anonymous'
