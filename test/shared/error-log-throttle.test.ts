// An unexpected error is logged once per kind per interval, not once per request (issue 33, row 3:
// a stack trace per request of a reset pipeline, 3,200 lines). Unit cases on an injected clock, then
// the error handler both services install, on a real Fastify app answering a route that throws.
import { Writable } from 'node:stream'
import Fastify, { type FastifyBaseLogger } from 'fastify'
import { pino } from 'pino'
import t from 'tap'
import { installErrorHandling } from '../../src/interface/errors.js'
import { ErrorLogThrottle, errorKind, MAX_ERROR_KINDS } from '../../src/shared/error-log-throttle.js'

t.test('the first of a kind is logged, the rest of the interval counted, the next line says how many', async (t) => {
  const clock = { now: 1_000 }
  const throttle = new ErrorLogThrottle(60_000, () => clock.now)
  const boom = (): Error => new TypeError('Cannot read properties of undefined (reading \'ip\')')
  t.same(throttle.admit(boom()), { log: true, suppressed: 0 })
  for (let i = 1; i <= 99; i++) t.same(throttle.admit(boom()), { log: false, suppressed: i })
  t.same(throttle.admit(new RangeError('other')), { log: true, suppressed: 0 }, 'another kind has its own interval')
  clock.now += 60_000
  t.same(throttle.admit(boom()), { log: true, suppressed: 99 }, 'an interval later: logged, with the count left out')
  t.same(throttle.admit(boom()), { log: false, suppressed: 1 })
})

t.test('the kind is the class, the code and the start of the message', async (t) => {
  const coded = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })
  t.equal(errorKind(coded), 'Error:ECONNRESET:socket hang up')
  t.equal(errorKind('a string'), 'string')
  t.equal(errorKind(new Error('x'.repeat(1000))).length, 'Error::'.length + 200)
})

t.test('the kinds remembered are bounded: past the bound, new kinds share one entry', async (t) => {
  const clock = { now: 0 }
  const throttle = new ErrorLogThrottle(60_000, () => clock.now)
  for (let i = 0; i < MAX_ERROR_KINDS; i++) t.equal(throttle.admit(new Error(`kind ${i}`)).log, true)
  t.same(throttle.admit(new Error('one more')), { log: true, suppressed: 0 }, 'the first beyond the bound is logged')
  t.same(throttle.admit(new Error('yet another')), { log: false, suppressed: 1 }, 'and shares its interval with every other new kind')
  clock.now += 60_000
  t.same(throttle.admit(new Error('a new kind once the others are quiet')), { log: true, suppressed: 0 }, 'quiet kinds are forgotten for new ones')
})

t.test('the error handler: 100 requests failing the same way, one log line, every one answered 500 in the Error shape', async (t) => {
  const lines: Array<Record<string, unknown>> = []
  const stream = new Writable({
    write (chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString().split('\n')) if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>)
      cb()
    }
  })
  const app = Fastify({ loggerInstance: pino({ level: 'warn' }, stream) as FastifyBaseLogger })
  installErrorHandling(app)
  app.get('/boom', async (request) => (request as unknown as { missing: { ip: string } }).missing.ip)
  t.teardown(() => app.close())
  for (let i = 0; i < 100; i++) {
    const res = await app.inject({ method: 'GET', url: '/boom' })
    t.equal(res.statusCode, 500)
    t.same(res.json(), { code: 'internal_error', message: 'The server could not complete the request', status: 500 })
  }
  t.equal(lines.length, 1, 'one line for the hundred')
  t.match(lines[0], { msg: 'request failed', err: { type: 'TypeError' } })
})
