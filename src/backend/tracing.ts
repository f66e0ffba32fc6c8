// Tracing in the backend (docs/tracing.md). The backend is internal: whatever `traceparent` the
// gateway sends is continued, and its trace id goes into every log line of the request, tracing on or
// off. With an OTLP endpoint, tracing-spans.ts (imported here, never with tracing off) adds the spans:
// the request, its handler (both from @fastify/otel) and each SQLite statement, whose wrapper is
// installed when the store opens — before the SDK has loaded — and starts spans once it has.
import fp from 'fastify-plugin'
import type { FastifyBaseLogger } from 'fastify'
import type { IncomingMessage } from 'node:http'
import type { SQLInputValue, StatementSync } from 'node:sqlite'
import type { Bindings, ChildLoggerOptions } from 'pino'
import type { TracingSettings } from '../shared/tracing/settings.js'
import { traceIdOf } from '../shared/tracing/traceparent.js'
import type { Statement } from './store.js'

export const DEFAULT_BACKEND_SERVICE_NAME = 'petstore-backend'

/** Runs one execution of a statement, in a span once tracing has started. */
export interface StatementRunner {
  run: <T>(statement: StatementSync, execute: () => T) => T
}

/** The store's statement wrapper, and the runner tracing-spans.ts attaches to it. */
export interface TracedStatements {
  wrap: (statement: StatementSync) => Statement
  attach: (runner: StatementRunner) => void
}

export function tracedStatements (): TracedStatements {
  let runner: StatementRunner | undefined
  return {
    wrap (statement) {
      return {
        get: (...params: SQLInputValue[]) => runner === undefined ? statement.get(...params) : runner.run(statement, () => statement.get(...params)),
        all: (...params: SQLInputValue[]) => runner === undefined ? statement.all(...params) : runner.run(statement, () => statement.all(...params))
      }
    },
    attach (r) { runner = r }
  }
}

/** Fastify's childLoggerFactory: the request id, then the trace id of the `traceparent` received. */
export function childLoggerWithTraceId (logger: FastifyBaseLogger, bindings: Bindings, opts: ChildLoggerOptions, raw: IncomingMessage): FastifyBaseLogger {
  const traceId = traceIdOf(raw.headers.traceparent)
  return logger.child(traceId === undefined ? bindings : { ...bindings, traceId }, opts)
}

export function tracingEnabled (settings: TracingSettings | undefined): settings is TracingSettings & { tracesUrl: string } {
  return settings?.tracesUrl !== undefined
}

export interface BackendTracingOptions {
  settings: TracingSettings | undefined
  statements: TracedStatements
}

/** Loads the SDK and tracing-spans.ts; registered before the routes (their handlers get spans). */
export const backendTracing = fp<BackendTracingOptions>(async function backendTracing (app, opts) {
  if (!tracingEnabled(opts.settings)) return
  const { registerBackendSpans } = await import('./tracing-spans.js')
  await registerBackendSpans(app, opts.settings, opts.statements)
}, { name: 'backend-tracing' })
