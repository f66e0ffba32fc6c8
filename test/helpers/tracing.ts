// Tracing settings pointed at a test's OTLP receiver (exports every few ms, so a test waits little),
// and readers of what was received: one trace's spans, a span's children, every string a span carries.
import { createHash } from 'node:crypto'
import { tracingSettingsFromEnv, type TracingSettings } from '../../src/shared/tracing/settings.js'
import type { AttributeValue, OtlpReceiver, ReceivedSpan } from './otlp-receiver.js'

/** Export delay of the tests' batch processors: spans leave within a few ms of ending. */
export const TEST_SCHEDULE_DELAY_MS = 10

export function tracingTo (receiverUrl: string, serviceName: string, env: Record<string, string> = {}): TracingSettings {
  return tracingSettingsFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: receiverUrl, OTEL_BSP_SCHEDULE_DELAY: String(TEST_SCHEDULE_DELAY_MS), ...env }, serviceName)
}

export function serviceOf (span: ReceivedSpan): AttributeValue | undefined {
  return span.resource['service.name']
}

export function childrenOf (spans: ReceivedSpan[], parent: ReceivedSpan): ReceivedSpan[] {
  return spans.filter((s) => s.traceId === parent.traceId && s.parentSpanId === parent.spanId)
}

/** The one span of `trace` named `name` of `service`; throws (naming what is there) when not exactly one. */
export function theSpan (spans: ReceivedSpan[], traceId: string, service: string, name: string): ReceivedSpan {
  const found = spans.filter((s) => s.traceId === traceId && serviceOf(s) === service && s.name === name)
  if (found.length !== 1) throw new Error(`${found.length} spans "${name}" of ${service} in trace ${traceId}; there are: ${spans.filter((s) => s.traceId === traceId).map((s) => `${String(serviceOf(s))}:${s.name}`).join(', ')}`)
  return found[0] as ReceivedSpan
}

/** Waits until `trace` has at least `count` spans, and returns them. */
export async function traceSpans (receiver: OtlpReceiver, traceId: string, count: number): Promise<ReceivedSpan[]> {
  const all = await receiver.waitFor(`${count} spans of trace ${traceId}`, (spans) => spans.filter((s) => s.traceId === traceId).length >= count)
  return all.filter((s) => s.traceId === traceId)
}

function strings (value: AttributeValue): string[] {
  if (Array.isArray(value)) return value.flatMap(strings)
  if (typeof value === 'object') return Object.entries(value).flatMap(([k, v]) => [k, ...strings(v)])
  return [String(value)]
}

/** Every name, key and value a span carries (attributes, events, links, status, resource). */
export function everyString (span: ReceivedSpan): string[] {
  return [
    span.name, span.traceState, span.status.message, span.scope,
    ...strings(span.attributes), ...strings(span.resource),
    ...span.events.flatMap((e) => [e.name, ...strings(e.attributes)]),
    ...span.links.flatMap((l) => strings(l.attributes))
  ]
}

/** What must never leave in a span: the key, its SHA-256 (hex and base64), and anything of the Authorization header. */
export function secretsOf (key: string): string[] {
  const digest = createHash('sha256').update(key).digest()
  return [key, digest.toString('hex'), digest.toString('base64'), 'Bearer', 'authorization']
}

/** The secrets found in `spans` and in the raw export bodies (case-insensitive), as `secret in where`. */
export function leaks (receiver: OtlpReceiver, secrets: string[]): string[] {
  const found: string[] = []
  for (const span of receiver.spans) {
    for (const text of everyString(span)) {
      for (const secret of secrets) if (text.toLowerCase().includes(secret.toLowerCase())) found.push(`${secret} in span ${span.name}: ${text}`)
    }
  }
  for (const body of receiver.bodies) {
    const raw = body.toString('latin1').toLowerCase()
    for (const secret of secrets) if (raw.includes(secret.toLowerCase())) found.push(`${secret} in an export body`)
  }
  return found
}
