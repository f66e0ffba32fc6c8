// A collector for tests: a real OTLP/HTTP endpoint (POST /v1/traces) that decodes what the SDK sent —
// protobuf with a wire-format reader of its own (not the SDK's code, so a test does not check the
// exporter against itself) or OTLP/JSON — into one flat span shape. It can also stop answering
// (`hang`: requests are read and left open), to play a slow collector.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Test } from 'tap'
import { until } from './poll.js'

export type AttributeValue = string | number | boolean | AttributeValue[] | { [key: string]: AttributeValue }

export interface ReceivedSpan {
  traceId: string
  spanId: string
  parentSpanId: string
  traceState: string
  name: string
  /** OTLP SpanKind: 1 internal, 2 server, 3 client. */
  kind: number
  startNs: bigint
  endNs: bigint
  attributes: Record<string, AttributeValue>
  events: Array<{ name: string, attributes: Record<string, AttributeValue> }>
  links: Array<{ traceId: string, spanId: string, attributes: Record<string, AttributeValue> }>
  /** OTLP StatusCode: 0 unset, 1 ok, 2 error. */
  status: { code: number, message: string }
  /** Resource attributes (service.name …) of the batch the span came in. */
  resource: Record<string, AttributeValue>
  scope: string
}

export const SPAN_KIND = { internal: 1, server: 2, client: 3 } as const
export const STATUS_ERROR = 2

export interface OtlpReceiver {
  url: string
  /** `${url}/v1/traces` */
  tracesUrl: string
  spans: ReceivedSpan[]
  /** Content types of the requests received, in order. */
  contentTypes: string[]
  /** The raw bodies, for "never appears anywhere" checks. */
  bodies: Buffer[]
  /** Requests received and left unanswered (hang mode). */
  readonly pending: number
  hang: (on: boolean) => void
  /** Waits until `predicate` holds for the spans received so far. */
  waitFor: (what: string, predicate: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number) => Promise<ReceivedSpan[]>
  close: () => Promise<void>
}

// ---------------------------------------------------------------------------------------------
// Protobuf wire format: just enough to read ExportTraceServiceRequest (opentelemetry-proto v1).

interface Field { no: number, wire: number, value: bigint | Buffer }

function fields (buf: Buffer): Field[] {
  const out: Field[] = []
  let pos = 0
  const varint = (): bigint => {
    let result = 0n
    let shift = 0n
    for (;;) {
      const byte = buf[pos++]
      if (byte === undefined) throw new Error('truncated varint')
      result |= BigInt(byte & 0x7f) << shift
      if ((byte & 0x80) === 0) return result
      shift += 7n
    }
  }
  while (pos < buf.length) {
    const key = Number(varint())
    const no = key >>> 3
    const wire = key & 7
    if (wire === 0) out.push({ no, wire, value: varint() })
    else if (wire === 1) { out.push({ no, wire, value: buf.readBigUInt64LE(pos) }); pos += 8 } else if (wire === 5) { out.push({ no, wire, value: BigInt(buf.readUInt32LE(pos)) }); pos += 4 } else if (wire === 2) {
      const len = Number(varint())
      out.push({ no, wire, value: buf.subarray(pos, pos + len) })
      pos += len
    } else throw new Error(`unsupported wire type ${wire}`)
  }
  return out
}

const bytesOf = (f: Field): Buffer => f.value as Buffer
const str = (f: Field): string => bytesOf(f).toString('utf8')
const hex = (f: Field): string => bytesOf(f).toString('hex')

function anyValue (buf: Buffer): AttributeValue {
  for (const f of fields(buf)) {
    switch (f.no) {
      case 1: return str(f)
      case 2: return f.value === 1n
      case 3: return Number(BigInt.asIntN(64, f.value as bigint))
      case 4: { const b = Buffer.alloc(8); b.writeBigUInt64LE(f.value as bigint); return b.readDoubleLE() }
      case 5: return fields(bytesOf(f)).filter((v) => v.no === 1).map((v) => anyValue(bytesOf(v)))
      case 6: return keyValues(fields(bytesOf(f)).filter((v) => v.no === 1))
      case 7: return bytesOf(f).toString('base64')
    }
  }
  return ''
}

function keyValues (list: Field[]): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {}
  for (const kv of list) {
    let key = ''
    let value: AttributeValue = ''
    for (const f of fields(bytesOf(kv))) {
      if (f.no === 1) key = str(f)
      else if (f.no === 2) value = anyValue(bytesOf(f))
    }
    out[key] = value
  }
  return out
}

function decodeSpan (buf: Buffer, resource: Record<string, AttributeValue>, scope: string): ReceivedSpan {
  const span: ReceivedSpan = {
    traceId: '', spanId: '', parentSpanId: '', traceState: '', name: '', kind: 0, startNs: 0n, endNs: 0n,
    attributes: {}, events: [], links: [], status: { code: 0, message: '' }, resource, scope
  }
  const attributes: Field[] = []
  for (const f of fields(buf)) {
    switch (f.no) {
      case 1: span.traceId = hex(f); break
      case 2: span.spanId = hex(f); break
      case 3: span.traceState = str(f); break
      case 4: span.parentSpanId = hex(f); break
      case 5: span.name = str(f); break
      case 6: span.kind = Number(f.value); break
      case 7: span.startNs = f.value as bigint; break
      case 8: span.endNs = f.value as bigint; break
      case 9: attributes.push(f); break
      case 11: {
        const e = fields(bytesOf(f))
        span.events.push({ name: str(e.find((x) => x.no === 2) ?? { no: 2, wire: 2, value: Buffer.alloc(0) }), attributes: keyValues(e.filter((x) => x.no === 3)) })
        break
      }
      case 13: {
        const l = fields(bytesOf(f))
        const get = (no: number): string => { const x = l.find((y) => y.no === no); return x === undefined ? '' : hex(x) }
        span.links.push({ traceId: get(1), spanId: get(2), attributes: keyValues(l.filter((x) => x.no === 4)) })
        break
      }
      case 15:
        for (const s of fields(bytesOf(f))) {
          if (s.no === 2) span.status.message = str(s)
          if (s.no === 3) span.status.code = Number(s.value)
        }
        break
    }
  }
  span.attributes = keyValues(attributes)
  return span
}

export function decodeProtobuf (body: Buffer): ReceivedSpan[] {
  const spans: ReceivedSpan[] = []
  for (const rs of fields(body).filter((f) => f.no === 1)) {
    const parts = fields(bytesOf(rs))
    const resourceField = parts.find((f) => f.no === 1)
    const resource = resourceField === undefined ? {} : keyValues(fields(bytesOf(resourceField)).filter((f) => f.no === 1))
    for (const ss of parts.filter((f) => f.no === 2)) {
      const scopeParts = fields(bytesOf(ss))
      const scopeField = scopeParts.find((f) => f.no === 1)
      const scopeName = scopeField === undefined ? '' : str(fields(bytesOf(scopeField)).find((f) => f.no === 1) ?? { no: 1, wire: 2, value: Buffer.alloc(0) })
      for (const s of scopeParts.filter((f) => f.no === 2)) spans.push(decodeSpan(bytesOf(s), resource, scopeName))
    }
  }
  return spans
}

// ---------------------------------------------------------------------------------------------
// OTLP/JSON (ids as hex, as the OTLP JSON encoding specifies).

type Json = Record<string, unknown>

function jsonValue (v: Json): AttributeValue {
  if ('stringValue' in v) return String(v.stringValue)
  if ('boolValue' in v) return v.boolValue === true
  if ('intValue' in v) return Number(v.intValue)
  if ('doubleValue' in v) return Number(v.doubleValue)
  if ('arrayValue' in v) return ((v.arrayValue as Json).values as Json[] ?? []).map(jsonValue)
  if ('kvlistValue' in v) return jsonAttributes((v.kvlistValue as Json).values as Json[])
  return ''
}

function jsonAttributes (list: Json[] | undefined): Record<string, AttributeValue> {
  return Object.fromEntries((list ?? []).map((kv) => [String(kv.key), jsonValue(kv.value as Json ?? {})]))
}

export function decodeJson (body: Buffer): ReceivedSpan[] {
  const doc = JSON.parse(body.toString('utf8')) as { resourceSpans?: Json[] }
  const spans: ReceivedSpan[] = []
  for (const rs of doc.resourceSpans ?? []) {
    const resource = jsonAttributes((rs.resource as Json | undefined)?.attributes as Json[])
    for (const ss of (rs.scopeSpans as Json[] | undefined) ?? []) {
      const scope = String((ss.scope as Json | undefined)?.name ?? '')
      for (const s of (ss.spans as Json[] | undefined) ?? []) {
        const status = (s.status as Json | undefined) ?? {}
        spans.push({
          traceId: String(s.traceId ?? ''),
          spanId: String(s.spanId ?? ''),
          parentSpanId: String(s.parentSpanId ?? ''),
          traceState: String(s.traceState ?? ''),
          name: String(s.name ?? ''),
          kind: Number(s.kind ?? 0),
          startNs: BigInt(String(s.startTimeUnixNano ?? 0)),
          endNs: BigInt(String(s.endTimeUnixNano ?? 0)),
          attributes: jsonAttributes(s.attributes as Json[]),
          events: ((s.events as Json[] | undefined) ?? []).map((e) => ({ name: String(e.name ?? ''), attributes: jsonAttributes(e.attributes as Json[]) })),
          links: ((s.links as Json[] | undefined) ?? []).map((l) => ({ traceId: String(l.traceId ?? ''), spanId: String(l.spanId ?? ''), attributes: jsonAttributes(l.attributes as Json[]) })),
          status: { code: Number(status.code ?? 0), message: String(status.message ?? '') },
          resource,
          scope
        })
      }
    }
  }
  return spans
}

// ---------------------------------------------------------------------------------------------

export async function startOtlpReceiver (t: Test): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = []
  const contentTypes: string[] = []
  const bodies: Buffer[] = []
  const held = new Set<ServerResponse>()
  let hanging = false
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      if (hanging) { held.add(res); return }
      const body = Buffer.concat(chunks)
      const type = req.headers['content-type'] ?? ''
      if (req.method !== 'POST' || req.url !== '/v1/traces') { res.writeHead(404).end(); return }
      contentTypes.push(type)
      bodies.push(body)
      try {
        spans.push(...(type.startsWith('application/json') ? decodeJson(body) : decodeProtobuf(body)))
      } catch (err) {
        res.writeHead(400).end(String(err))
        return
      }
      if (type.startsWith('application/json')) res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
      else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const close = async (): Promise<void> => {
    for (const res of held) res.destroy()
    held.clear()
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
  t.teardown(close)
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`
  return {
    url,
    tracesUrl: `${url}/v1/traces`,
    spans,
    contentTypes,
    bodies,
    get pending () { return held.size },
    hang: (on) => { hanging = on },
    waitFor: async (what, predicate, timeoutMs = 10_000) => {
      await until(what, () => predicate(spans), timeoutMs)
      return spans
    },
    close
  }
}
