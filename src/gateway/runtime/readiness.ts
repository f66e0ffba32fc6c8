// Liveness and readiness state shared by the public app (whose plugins register checks: backend,
// limiter store) and the admin app (which serves /healthz and /readyz from it).
import fp from 'fastify-plugin'

/** Resolves (optionally with details shown beside `ok`) when usable; rejects with the reason otherwise. */
export type ReadinessCheck = () => Promise<void | Record<string, unknown>>

export interface HealthState {
  /** Named checks; each resolves when its dependency is usable and rejects with the reason otherwise. */
  readonly checks: Map<string, ReadinessCheck>
  /** Set when shutdown starts, so readiness fails first and load balancers drain this instance. */
  draining: boolean
}

declare module 'fastify' {
  interface FastifyInstance {
    health: HealthState
  }
}

export interface ReadinessReport {
  ready: boolean
  checks: Record<string, { ok: boolean, error?: string, [detail: string]: unknown }>
}

export async function checkReadiness (health: HealthState, timeoutMs = 1000): Promise<ReadinessReport> {
  const checks: ReadinessReport['checks'] = { draining: health.draining ? { ok: false, error: 'shutting down' } : { ok: true } }
  await Promise.all([...health.checks].map(async ([name, check]) => {
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

export const healthPlugin = fp(async function healthPlugin (app) {
  app.decorate('health', { checks: new Map<string, ReadinessCheck>(), draining: false })
}, { name: 'gateway-health' })
