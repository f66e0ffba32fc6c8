// The gateway's readiness: one registry object, created beside the public app (buildGateway makes one
// unless it is given one) and handed explicitly to what writes it — the plugins whose dependencies
// decide readiness (backend, limiter store) and the stop sequence (draining) — and to what reads it,
// the admin app's /readyz. No shared mutable state hangs off the Fastify instance.

/** Resolves (optionally with details shown beside `ok`) when usable; rejects with the reason otherwise. */
export type ReadinessCheck = () => Promise<void | Record<string, unknown>>

export interface ReadinessReport {
  ready: boolean
  checks: Record<string, { ok: boolean, error?: string, [detail: string]: unknown }>
}

/** How long /readyz waits for one check before counting it as failed. */
export const DEFAULT_READINESS_TIMEOUT_MS = 1000

export class ReadinessRegistry {
  readonly #checks = new Map<string, ReadinessCheck>()
  #draining = false

  /** A named check; each resolves when its dependency is usable and rejects with the reason otherwise. */
  register (name: string, check: ReadinessCheck): void {
    this.#checks.set(name, check)
  }

  /** Called when shutdown starts, so readiness fails first and load balancers drain this instance. */
  drain (): void {
    this.#draining = true
  }

  get draining (): boolean {
    return this.#draining
  }

  /** Runs every check at once, each bounded by `timeoutMs`; `draining` is reported as a check of its own. */
  async report (timeoutMs = DEFAULT_READINESS_TIMEOUT_MS): Promise<ReadinessReport> {
    const checks: ReadinessReport['checks'] = { draining: this.#draining ? { ok: false, error: 'shutting down' } : { ok: true } }
    await Promise.all([...this.#checks].map(async ([name, check]) => {
      let timer: NodeJS.Timeout | undefined
      try {
        const detail = await Promise.race([check(), new Promise<never>((_resolve, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs)
        })])
        checks[name] = { ...(detail ?? {}), ok: true }
      } catch (err) {
        checks[name] = { ok: false, error: err instanceof Error ? err.message : String(err) }
      } finally {
        clearTimeout(timer)
      }
    }))
    return { ready: Object.values(checks).every((c) => c.ok), checks }
  }
}
