// Trace and span ids (random bytes as lowercase hex, never all zero, as W3C Trace Context wants them),
// made without loading the SDK: the gateway picks a trace's id before it decides whether to sample it
// (edge-sampler.ts decides on the id, as the SDK's ratio sampler does), and as the SDK's IdGenerator
// hands it that same id for the root span of a sampled trace. The bytes come from the system's
// generator a pool at a time (crypto.randomFillSync): cheaper per id than the SDK's Math.random words
// written into a buffer, and not guessable from earlier ids.
import { randomFillSync } from 'node:crypto'
import type { IdGenerator } from '@opentelemetry/sdk-trace'

const TRACE_ID_BYTES = 16
const SPAN_ID_BYTES = 8
/** Random bytes drawn at once: 170 requests' ids (a trace id and a span id each). */
const POOL_BYTES = 4096

export class TraceIds implements IdGenerator {
  readonly #pool = Buffer.allocUnsafe(POOL_BYTES)
  #used = POOL_BYTES
  #nextTraceId: string | undefined

  traceId (): string {
    return this.#random(TRACE_ID_BYTES)
  }

  spanId (): string {
    return this.#random(SPAN_ID_BYTES)
  }

  /** The id the SDK's next root span takes (the one the sampling decision was made on); used once. */
  useForNextRoot (traceId: string): void {
    this.#nextTraceId = traceId
  }

  generateTraceId (): string {
    const next = this.#nextTraceId
    this.#nextTraceId = undefined
    return next ?? this.traceId()
  }

  generateSpanId (): string {
    return this.spanId()
  }

  #random (bytes: number): string {
    const pool = this.#pool
    if (this.#used + bytes > POOL_BYTES) {
      randomFillSync(pool)
      this.#used = 0
    }
    const from = this.#used
    this.#used += bytes
    // An all-zero id is invalid: set its last byte then, as the SDK does.
    let zero = true
    for (let i = from; i < from + bytes && zero; i++) zero = pool[i] === 0
    if (zero) pool[from + bytes - 1] = 1
    return pool.toString('hex', from, from + bytes)
  }
}
