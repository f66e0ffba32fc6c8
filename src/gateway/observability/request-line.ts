// The request line, written by the gateway instead of serialized by pino. pino's asJson reads every field through its
// serializer table and a stringifier per type and builds the line in pieces; for the one line every request writes
// that cost 1–6 µs of CPU per request more end to end (docs/performance.md, fifteenth round). This line's fields are
// plain (strings, numbers, booleans, null, one flat object), so it is written here in pino's own format —
// `{"level":30,"time":<ms>`, the logger's bindings, the fields in order, `"msg"` — and handed to the same
// destination. request-line.test.ts holds the two byte for byte equal. Only the logger createGatewayLogging makes (and
// its children: Fastify's, a request's) has a writer, since its options are the ones reproduced here — pino's default
// level and time formats, `msg`, no mixin — and the fields' names are none its serializers touch (req, res, err) nor
// any path it redacts (LOG_REDACT_PATHS: headers, authorization), which this writer would not; a line for any other
// logger goes through pino.
import { symbols, type Logger } from 'pino'

/** Writes one line of `fields` and `message` as `logger.info(fields, message)` would, for the gateway's logger or a child of it. */
export type RequestLineWriter = (logger: Logger, fields: Readonly<Record<string, unknown>>, message: string) => void

/** pino's level 30 (info) as its default level formatter writes it. */
const INFO_LEVEL = 30

/** A field's value as pino writes it: undefined (the field left out) for undefined and functions, null for a number that is not finite. */
function jsonValue (value: unknown): string | undefined {
  switch (typeof value) {
    case 'string': return JSON.stringify(value)
    case 'number': return Number.isFinite(value) ? String(value) : 'null'
    case 'boolean': return value ? 'true' : 'false'
    case 'undefined':
    case 'function': return undefined
    default: return JSON.stringify(value)
  }
}

/** `,"name":value` for each field of `fields` that pino would write, in their order. */
export function jsonFields (fields: Readonly<Record<string, unknown>>): string {
  let text = ''
  for (const name in fields) {
    const value = jsonValue(fields[name])
    if (value !== undefined) text += `,"${name}":${value}`
  }
  return text
}

/** `logger`'s bindings as pino writes them after the time: its base fields and its children's (`,"name":value…`). */
function bindingsOf (logger: Logger): string {
  const bindings = (logger as unknown as Record<symbol, unknown>)[symbols.chindingsSym]
  return typeof bindings === 'string' ? bindings : ''
}

/** The writer into `write` (the gateway logger's destination), its time from `now` (pino's default: Unix ms). */
export function requestLineWriter (write: (line: string) => void, now: () => number = Date.now): RequestLineWriter {
  const head = `{"level":${INFO_LEVEL},"time":`
  return (logger, fields, message) => {
    if (!logger.isLevelEnabled('info')) return
    write(`${head}${now()}${bindingsOf(logger)}${jsonFields(fields)},"msg":${JSON.stringify(message)}}\n`)
  }
}
