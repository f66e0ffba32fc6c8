import t from 'tap'
import { closeSync, openSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { createGatewayLogging } from '../../../src/gateway/observability/logger.js'
import { jsonFields } from '../../../src/gateway/observability/request-line.js'

/** Lines written to `file`, as text. */
const rawLines = (file: string): string[] => readFileSync(file, 'utf8').split('\n').filter((line) => line !== '')
const withoutTime = (line: string): string => line.replace(/"time":\d+/, '"time":0')

/** Every shape of field the request line carries, and the values that make a JSON writer differ. */
const FIELD_SETS: Array<Record<string, unknown>> = [
  { reqId: '0b7e3c1e-8a4f-4a57-9d2b-52b1f0c3a9e1', consumerId: 'acme', keyId: 'demo-pro', plan: 'pro', method: 'GET', route: '/v1/pets/:petId', status: 200, durationMs: 1.234, upstreamMs: 0.812, rateLimit: { outcome: 'ok', policy: 'pro', remaining: 4321 }, deprecated: true },
  { reqId: 'r2', consumerId: null, keyId: null, plan: 'anonymous', method: 'POST', route: 'unmatched', status: 401, durationMs: 0.05, upstreamMs: null, rateLimit: undefined, deprecated: undefined },
  { reqId: 'r3', traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', consumerId: 'quote"back\\slash', keyId: 'new\nline\ttab\u0001', plan: 'ünïcødé ✓ 🐾', method: 'DELETE', route: '/v1/pets', status: 429, durationMs: 12, upstreamMs: -0, rateLimit: { outcome: 'rejected', policy: 'free', remaining: Infinity }, deprecated: false },
  { reqId: 'x'.repeat(150), status: NaN, durationMs: 1e21, upstreamMs: 5e-7, rateLimit: null, nested: { list: [1, 'two', null], deep: { ok: true } }, skipped: () => 1 }
]

t.test('the request line is the line pino writes for the same fields, byte for byte but the time', async (t) => {
  const file = join(t.testdir(), 'log.ndjson')
  const fd = openSync(file, 'w')
  t.teardown(() => closeSync(fd))
  const { logger, requestLine } = createGatewayLogging({ level: 'info', fd, bufferBytes: 0 })
  // The loggers a request line goes through: the gateway's, Fastify's child of it (serializers added, no bindings),
  // and a child with bindings of its own.
  const loggers = [logger, logger.child({}, { serializers: { req: () => 'x' } }), logger.child({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736', sampled: true })]
  const before = Date.now()
  for (const through of loggers) {
    for (const fields of FIELD_SETS) {
      through.info(fields, 'request')
      requestLine(through, fields, 'request')
    }
  }
  const after = Date.now()
  const lines = rawLines(file)
  t.equal(lines.length, loggers.length * FIELD_SETS.length * 2)
  for (let index = 0; index < lines.length / 2; index++) {
    const [byPino, byWriter] = [lines[index * 2] ?? '', lines[index * 2 + 1] ?? '']
    t.equal(withoutTime(byWriter), withoutTime(byPino), `logger ${Math.floor(index / FIELD_SETS.length) + 1}, field set ${index % FIELD_SETS.length + 1}`)
    const parsed = JSON.parse(byWriter) as Record<string, unknown>
    t.ok((parsed.time as number) >= before && (parsed.time as number) <= after, 'its time is the clock\'s, in ms')
    t.match(parsed, { level: 30, service: 'gateway', pid: process.pid, msg: 'request' })
  }
})

t.test('below info the writer writes nothing, as pino would not', async (t) => {
  const file = join(t.testdir(), 'log.ndjson')
  const fd = openSync(file, 'w')
  t.teardown(() => closeSync(fd))
  const { logger, requestLine } = createGatewayLogging({ level: 'warn', fd, bufferBytes: 0 })
  requestLine(logger, { reqId: 'r1' }, 'request')
  t.same(rawLines(file), [])
  logger.level = 'info'
  requestLine(logger, { reqId: 'r2' }, 'request')
  t.match(rawLines(file).map((line) => JSON.parse(line) as unknown), [{ level: 30, reqId: 'r2', msg: 'request' }], 'a level lowered at run time lets it write')
})

t.test('a field pino leaves out (undefined, a function) is left out; a number that is not finite is null', async (t) => {
  t.equal(jsonFields({ a: undefined, b: () => 1, c: Infinity, d: -Infinity, e: NaN, f: 'x' }), ',"c":null,"d":null,"e":null,"f":"x"')
  t.equal(jsonFields({}), '')
})

t.test('a lone surrogate is escaped (valid JSON, as JSON.stringify writes it), where pino would write it raw', async (t) => {
  t.equal(jsonFields({ route: 'a\ud800b' }), ',"route":"a\\ud800b"')
})
