import { Writable } from 'node:stream'
import t from 'tap'
import { pino, type Logger } from 'pino'
import type { FastifyRequest } from 'fastify'
import { bindRequestLog, LazyChildLogger, lazyChildLoggerFactory } from '../../../src/gateway/observability/request-log.js'
import { ApiError } from '../../../src/interface/errors.js'
import { gatewayErrors } from '../../../src/interface/errors.js'

function capture (): { logger: Logger, lines: string[] } {
  const lines: string[] = []
  const stream = new Writable({ write (chunk: Buffer, _enc, done) { lines.push(...chunk.toString().split('\n').filter((l) => l !== '')); done() } })
  const logger = pino({ level: 'info', timestamp: false, base: { service: 'gateway', pid: 1 } }, stream)
  return { logger, lines }
}

t.test('a lazy child logs exactly what pino\'s child logs, and makes no child until it logs', async (t) => {
  const { logger, lines } = capture()
  const lazy = lazyChildLoggerFactory(logger, { reqId: 'r-1' }, {})
  t.ok(lazy instanceof LazyChildLogger)
  t.equal((lazy as unknown as { made: unknown }).made, undefined, 'no child yet')
  lazy.info({ a: 1 }, 'hello')
  lazy.warn('plain %s', 'text')
  lazy.debug('below the level')
  logger.child({ reqId: 'r-1' }).info({ a: 1 }, 'hello')
  logger.child({ reqId: 'r-1' }).warn('plain %s', 'text')
  await new Promise((resolve) => setImmediate(resolve))
  t.equal(lines.length, 4)
  t.equal(lines[0], lines[2])
  t.equal(lines[1], lines[3])
  t.equal(lazy.level, 'info')
})

t.test('the request line through the parent, bindings first, has the bytes of the line through the child', async (t) => {
  const { logger, lines } = capture()
  const lazy = lazyChildLoggerFactory(logger, { reqId: 'r-2' }, {}) as LazyChildLogger
  const fields = { keyId: 'k', plan: 'pro', route: '/v1/pets', status: 200, rateLimit: { outcome: 'ok', policy: 'pro', remaining: 3 } }
  lazy.parent.info({ ...lazy.bindings, ...fields }, 'request')
  logger.child({ reqId: 'r-2' }).info(fields, 'request')
  await new Promise((resolve) => setImmediate(resolve))
  t.equal(lines[0], lines[1])
  t.match(lines[0], /^\{"level":30,"service":"gateway","pid":1,"reqId":"r-2","keyId":"k"/)
})

t.test('a route with its own log level gets pino\'s child at once', async (t) => {
  const { logger } = capture()
  const child = lazyChildLoggerFactory(logger, { reqId: 'r-3' }, { level: 'warn' })
  t.notOk(child instanceof LazyChildLogger)
  t.equal(child.level, 'warn')
})

t.test('bindRequestLog: the trace id right after the request id, before or after the child exists, lazy or not', async (t) => {
  const { logger, lines } = capture()
  const early = { log: lazyChildLoggerFactory(logger, { reqId: 'r-4' }, {}) } as FastifyRequest
  bindRequestLog(early, { traceId: 't-4' })
  early.log.info('early')
  const late = { log: lazyChildLoggerFactory(logger, { reqId: 'r-5' }, {}) } as FastifyRequest
  late.log.info('before')
  bindRequestLog(late, { traceId: 't-5' })
  late.log.info('after')
  const own = { log: lazyChildLoggerFactory(logger, { reqId: 'r-6' }, { level: 'info' }) } as FastifyRequest
  bindRequestLog(own, { traceId: 't-6' })
  own.log.info('own level')
  await new Promise((resolve) => setImmediate(resolve))
  t.same(lines.map((l) => JSON.parse(l) as Record<string, unknown>).map((l) => [l.msg, l.reqId, l.traceId]), [
    ['early', 'r-4', 't-4'], ['before', 'r-5', undefined], ['after', 'r-5', 't-5'], ['own level', 'r-6', 't-6']
  ])
  t.ok(lines.every((l) => !l.includes('traceId') || /"reqId":"r-\d","traceId"/.test(l)), 'traceId follows reqId')
})

t.test('ApiError carries no stack frames (none is ever shown or logged) and keeps its shape', async (t) => {
  const err = gatewayErrors.rateLimited(12, 'minute')
  t.ok(err instanceof ApiError && err instanceof Error)
  t.equal(err.stack?.split('\n').length, 1, 'the stack is the message line only')
  t.same(err.body, { code: 'rate_limited', message: 'Rate limit exceeded for the minute window; retry after 12 s', status: 429 })
  t.same(err.headers, { 'retry-after': '12' })
  t.equal(Error.stackTraceLimit > 0, true, 'the process\'s own limit is untouched')
  t.ok((new Error('other').stack?.split('\n').length ?? 0) > 1, 'other errors still have stacks')
})
