// startGateway: a real gateway (public + admin apps) on free loopback ports in front of a real
// backend (started here unless a URL is given), with its pino lines captured for assertions.
import { Writable } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import { pino } from 'pino'
import type { Test } from 'tap'
import { buildAdmin } from '../../src/gateway/admin/app.js'
import { ReadinessRegistry } from '../../src/gateway/runtime/readiness.js'
import { buildGateway, type GatewayOptionsBase } from '../../src/gateway/app.js'
import type { ConfigHolder } from '../../src/gateway/config/plugin.js'
import type { ReloadOptions } from '../../src/gateway/config/reload.js'
import type { ConfigSnapshot } from '../../src/gateway/config/types.js'
import { bearer, testConfig } from './config-fixture.js'
import { LOG_REDACT_PATHS } from '../../src/gateway/observability/request-log.js'
import { gatewayErrors } from '../../src/interface/errors.js'
import { startBackend, type StartedBackend } from './backend.js'
import { PROCESS_START_TIMEOUT_MS } from './ports.js'

export interface StartedGateway {
  url: string
  adminUrl: string
  app: FastifyInstance
  admin: FastifyInstance
  /** The readiness registry shared by the gateway and its admin app. */
  readiness: ReadinessRegistry
  backend: StartedBackend | undefined
  /** Every log line the gateway wrote, parsed. */
  logs: Array<Record<string, unknown>>
  /** The raw log text, for "never appears anywhere" assertions. */
  rawLogs: () => string
  close: () => Promise<void>
}

/** Gateway options, every one optional: `reload` (a config directory) or `config`; neither: the fixture config (testConfig()). */
export interface StartGatewayOptions extends Partial<Omit<GatewayOptionsBase, 'logger'>> {
  config?: ConfigSnapshot | ConfigHolder
  reload?: ReloadOptions
  adminToken?: string
  /** ADMIN_HOSTS of the admin app. */
  adminHosts?: readonly string[]
  logLevel?: string
}

export async function startGateway (t: Test, opts: StartGatewayOptions = {}): Promise<StartedGateway> {
  const backend = opts.backendUrl === undefined ? await startBackend(t) : undefined
  const chunks: string[] = []
  const logs: Array<Record<string, unknown>> = []
  const stream = new Writable({
    write (chunk: Buffer, _enc, cb) {
      const text = chunk.toString()
      chunks.push(text)
      for (const line of text.split('\n')) if (line !== '') logs.push(JSON.parse(line) as Record<string, unknown>)
      cb()
    }
  })
  const logger = pino({ level: opts.logLevel ?? 'info', redact: LOG_REDACT_PATHS }, stream)
  const { adminToken, adminHosts, logLevel: _logLevel, config, reload, ...gatewayOptions } = opts
  // A gateway on a config directory loads its first config from it: a snapshot beside it would never be used.
  if (config !== undefined && reload !== undefined) throw new Error('startGateway: give `config` or `reload`, not both')
  const readiness = opts.readiness ?? new ReadinessRegistry()
  const app = await buildGateway({
    // Off unless a test is about it: a test's own bursts (and a loaded machine) would otherwise
    // have requests shed where the test counts the limiter's answers (test/gateway/edge/load-shedding.test.ts).
    loadShedding: { queueDelayMs: 0 },
    // A plugin's start is not what these tests time: the reload plugin's first load (a worker thread)
    // missed Fastify's 10 s at load 20–30 and the gateway failed to start.
    pluginTimeoutMs: PROCESS_START_TIMEOUT_MS,
    ...gatewayOptions,
    ...(reload === undefined ? { config: config ?? testConfig() } : { reload }),
    readiness,
    backendUrl: opts.backendUrl ?? backend?.url ?? '',
    logger
  })
  const admin = await buildAdmin({ gateway: app, readiness, token: adminToken, hosts: adminHosts })
  let closing: Promise<void> | undefined
  const close = async (): Promise<void> => {
    closing ??= (async () => { await app.close(); await admin.close() })()
    await closing
  }
  t.teardown(close)
  await app.listen({ host: '127.0.0.1', port: 0 })
  await admin.listen({ host: '127.0.0.1', port: 0 })
  const port = (app.server.address() as { port: number }).port
  const adminPort = (admin.server.address() as { port: number }).port
  return {
    url: `http://127.0.0.1:${port}`,
    adminUrl: `http://127.0.0.1:${adminPort}`,
    app,
    admin,
    readiness,
    backend,
    logs,
    rawLogs: () => chunks.join(''),
    close
  }
}

/** `n` concurrent `GET /v1/pets?limit=1` with `key`, spread round-robin over `gateways`; their statuses in order. */
export async function burst (gateways: StartedGateway[], key: string, n: number): Promise<number[]> {
  return (await burstAnswers(gateways, key, n)).map((answer) => answer.status)
}

/** One answer of a burst: its status, and the code and message of an Error body. */
export interface BurstAnswer { readonly status: number, readonly code?: string, readonly message?: string }

/** `burst`, keeping each refusal's code and message (what says who refused it). */
export async function burstAnswers (gateways: StartedGateway[], key: string, n: number): Promise<BurstAnswer[]> {
  return await Promise.all(Array.from({ length: n }, async (_, i) => {
    const res = await fetch(`${gateways[i % gateways.length]!.url}/v1/pets?limit=1`, { headers: bearer(key) })
    if (res.status < 400) { await res.arrayBuffer(); return { status: res.status } }
    const body = errorBody(await res.text())
    return { status: res.status, ...(body.code === undefined ? {} : { code: body.code }), ...(body.message === undefined ? {} : { message: body.message }) }
  }))
}

/** An Error body's code and message; nothing from a body that is not JSON. */
function errorBody (text: string): { code?: string, message?: string } {
  try {
    const parsed: unknown = JSON.parse(text)
    return typeof parsed === 'object' && parsed !== null ? parsed as { code?: string, message?: string } : {}
  } catch {
    return {}
  }
}

/** The upstream gate's refusal (the backend cannot take the request within its budget), whatever its Retry-After. */
const UPSTREAM_BUSY = gatewayErrors.upstreamBusy(1).message.replace(/\d+ s$/, '')

/**
 * Whether the limiter admitted the request: served, or refused after the limiter by the upstream gate, which sheds
 * what the backend cannot take in time (a unit counted all the same). How many the gate sheds is the machine's load;
 * what the limiter decided is not.
 */
export function limiterAdmitted (answer: BurstAnswer): boolean {
  return answer.status < 400 || (answer.status === 503 && answer.message?.startsWith(UPSTREAM_BUSY) === true)
}
