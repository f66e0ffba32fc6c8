// The backend's own spans and trace ids, called directly: a traceparent is continued (its id in the
// request's log lines), a request without one starts a trace whose id is logged all the same, and each
// SQLite statement is a span under its handler — an INSERT too, and one that fails carries the error.
import t from 'tap'
import { context, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace'
import { postJson, startBackend } from '../helpers/backend.js'
import { SPAN_KIND, STATUS_ERROR, startOtlpReceiver } from '../helpers/otlp-receiver.js'
import { childrenOf, theSpan, traceSpans, tracingTo } from '../helpers/tracing.js'
import { openStore } from '../../src/backend/store.js'
import { tracedStatements } from '../../src/backend/tracing.js'
import { statementRunner } from '../../src/backend/tracing-spans.js'

const BACKEND = 'petstore-backend'

t.test('a traceparent is continued; without one the backend starts a trace and logs its id', async (t) => {
  const receiver = await startOtlpReceiver(t)
  const backend = await startBackend(t, { tracing: tracingTo(receiver.url, BACKEND), logs: true })
  const trace = 'c'.repeat(32)
  const created = await fetch(`${backend.url}/v1/pets`, {
    ...postJson({ name: 'Rex', categoryId: 1 }),
    headers: { 'content-type': 'application/json', traceparent: `00-${trace}-${'d'.repeat(16)}-01` }
  })
  t.equal(created.status, 201)
  const spans = await traceSpans(receiver, trace, 3)
  const server = theSpan(spans, trace, BACKEND, 'POST /v1/pets')
  t.equal(server.parentSpanId, 'd'.repeat(16))
  const handler = theSpan(spans, trace, BACKEND, 'handler - createPet')
  t.equal(handler.parentSpanId, server.spanId)
  const insert = childrenOf(spans, handler)
  t.same(insert.map((s) => [s.name, s.kind, s.attributes['db.operation.name'], s.attributes['db.collection.name']]), [['INSERT pets', SPAN_KIND.client, 'INSERT', 'pets']])
  t.notOk(insert.some((s) => String(s.attributes['db.query.text']).includes('Rex')), 'values are bound, never in the statement text')

  const own = await fetch(`${backend.url}/v1/pets/1`)
  t.equal(own.status, 200)
  const reqId = own.headers.get('x-request-id')
  const line = backend.logs.find((l) => l.reqId === reqId && l.msg === 'request')
  t.match(line?.traceId, /^[0-9a-f]{32}$/, 'the backend\'s own trace id is logged')
  const rootSpans = await traceSpans(receiver, String(line?.traceId), 3)
  t.equal(theSpan(rootSpans, String(line?.traceId), BACKEND, 'GET /v1/pets/:petId').parentSpanId, '', 'a root span of that trace')
  t.ok(rootSpans.some((s) => s.name === 'SELECT pets'), 'with its SELECT')
})

t.test('a failing statement ends its span with the error; outside a request no span is made', async (t) => {
  // What the backend registers (once per process) when its tracing starts.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  const exporter = new InMemorySpanExporter()
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] })
  t.teardown(() => provider.shutdown())
  const statements = tracedStatements()
  const store = openStore(':memory:', { wrapStatement: statements.wrap })
  t.teardown(() => store.close())
  statements.attach(statementRunner(provider.getTracer('test')))

  store.createPet({ name: 'outside', categoryId: 1, status: 'available' })
  t.equal(exporter.getFinishedSpans().length, 0, 'a statement outside any span is not traced')

  const parent = provider.getTracer('test').startSpan('handler')
  context.with(trace.setSpan(context.active(), parent), () => {
    t.throws(() => store.createOrder({ petId: 999, quantity: 1, status: 'placed' }), /FOREIGN KEY/)
  })
  parent.end()
  const failed = exporter.getFinishedSpans().find((s) => s.name === 'INSERT orders')
  t.equal(failed?.status.code, STATUS_ERROR)
  t.equal(failed?.attributes['error.type'], 'ERR_SQLITE_ERROR')
  t.equal(failed?.parentSpanContext?.spanId, parent.spanContext().spanId)
})
