// The backend's spans, loaded only with tracing on (tracing.ts): @fastify/otel (the Fastify team's
// instrumentation) makes the request's server span — continuing the gateway's `traceparent` — and one
// span per route handler, lifecycle-hook spans off; each SQLite statement gets a client span under the
// handler's. The handler's context reaches the store through AsyncLocalStorage (the SDK's context
// manager), which is why the backend, unlike the gateway, registers one.
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import type { StatementSync } from 'node:sqlite'
import { context, propagation, SpanKind, SpanStatusCode, trace, type Span, type Tracer } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { FastifyOtelInstrumentation } from '@fastify/otel'
import {
  ATTR_CLIENT_ADDRESS, ATTR_DB_COLLECTION_NAME, ATTR_DB_OPERATION_NAME, ATTR_DB_QUERY_TEXT, ATTR_DB_SYSTEM_NAME, ATTR_ERROR_TYPE,
  ATTR_URL_PATH, ATTR_URL_SCHEME
} from '@opentelemetry/semantic-conventions'
import { startTracing } from '../shared/tracing/sdk.js'
import type { TracingSettings } from '../shared/tracing/settings.js'
import { traceIdOf } from '../shared/tracing/traceparent.js'
import type { StatementRunner, TracedStatements } from './tracing.js'

const DB_SYSTEM = 'sqlite'
/** `db.response.returned_rows` (semantic conventions, database spans). */
const ATTR_DB_RETURNED_ROWS = 'db.response.returned_rows'
const ATTR_REQUEST_ID = 'petstore.request_id'

interface StatementShape { readonly name: string, readonly attributes: Record<string, string> }

/** `SELECT … FROM pets …` → operation SELECT, collection pets: the span's name and attributes, once per statement. */
function shapeOf (sql: string): StatementShape {
  const operation = /^\s*(\w+)/.exec(sql)?.[1]?.toUpperCase() ?? 'SQL'
  const collection = /\b(?:FROM|INTO|UPDATE)\s+(\w+)/i.exec(sql)?.[1]
  return {
    name: collection === undefined ? operation : `${operation} ${collection}`,
    attributes: {
      [ATTR_DB_SYSTEM_NAME]: DB_SYSTEM,
      [ATTR_DB_OPERATION_NAME]: operation,
      // Parameterised text: the values are bound separately and never recorded.
      [ATTR_DB_QUERY_TEXT]: sql,
      ...(collection === undefined ? {} : { [ATTR_DB_COLLECTION_NAME]: collection })
    }
  }
}

export function statementRunner (tracer: Tracer): StatementRunner {
  const shapes = new WeakMap<StatementSync, StatementShape>()
  return {
    run (statement, execute) {
      const parent = context.active()
      // Outside a request (a seed, a migration): nothing to attach the statement to.
      if (trace.getSpan(parent) === undefined) return execute()
      let shape = shapes.get(statement)
      if (shape === undefined) {
        shape = shapeOf(statement.sourceSQL)
        shapes.set(statement, shape)
      }
      const span: Span = tracer.startSpan(shape.name, { kind: SpanKind.CLIENT, attributes: shape.attributes }, parent)
      try {
        const result = execute()
        if (Array.isArray(result)) span.setAttribute(ATTR_DB_RETURNED_ROWS, result.length)
        return result
      } catch (err) {
        const type = (err as { code?: string }).code ?? (err as Error).name
        span.setAttribute(ATTR_ERROR_TYPE, type)
        span.setStatus({ code: SpanStatusCode.ERROR, message: type })
        throw err
      } finally {
        span.end()
      }
    }
  }
}

let globalsRegistered = false

/** The context manager and propagator @fastify/otel reads through the API; once per process. */
function registerGlobals (): void {
  if (globalsRegistered) return
  globalsRegistered = true
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  propagation.setGlobalPropagator(new W3CTraceContextPropagator())
}

function pathOf (url: string): string {
  const q = url.indexOf('?')
  return q < 0 ? url : url.slice(0, q)
}

/** A trace the backend started itself (no `traceparent` received): its id into the request's log lines too. */
function logOwnTraceId (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
  if (traceIdOf(request.headers.traceparent) === undefined) {
    const span = request.opentelemetry().span
    if (span !== null && span !== undefined) request.log = request.log.child({ traceId: span.spanContext().traceId })
  }
  done()
}

export async function registerBackendSpans (app: FastifyInstance, settings: TracingSettings, statements: TracedStatements): Promise<void> {
  registerGlobals()
  const tracing = await startTracing(settings, app.log)
  const otel = new FastifyOtelInstrumentation({
    instrumentHooks: false,
    requestHook (span, request) {
      const route = request.routeOptions.url
      span.updateName(route === undefined ? request.method : `${request.method} ${route}`)
      span.setAttributes({
        // @fastify/otel records the whole URL as url.path; the query string stays out of spans.
        [ATTR_URL_PATH]: pathOf(request.url),
        [ATTR_URL_SCHEME]: request.protocol,
        [ATTR_CLIENT_ADDRESS]: request.ip,
        [ATTR_REQUEST_ID]: request.id
      })
    }
  })
  otel.setTracerProvider(tracing.provider)
  await app.register(otel.plugin())
  app.addHook('onRequest', logOwnTraceId)
  statements.attach(statementRunner(tracing.tracer))
  app.addHook('onClose', async () => {
    otel.disable()
    await tracing.shutdown()
  })
}
