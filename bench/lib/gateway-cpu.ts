// A gateway's CPU over one load window of the tracing rows, read from the gateway itself: its
// /metrics scrape carries process CPU to the microsecond (prom-client's process.cpuUsage()), where
// /proc counts 10 ms ticks — ±2.5 % of a 4 s window at a few hundred requests per second, more than
// the 2 % at stake. Net of an idle rate: what a gateway of the reference configuration burns per
// second between its windows (timers, log flushes) is taken off the window's CPU, so the figure is
// what the requests cost, whether the load generator reached its rate or not. Also the span
// counters, from the same scrape. Falls back to /proc for a gateway without the metrics.
import { cpuMicros } from './proc-cpu.js'

export interface GatewayReading {
  /** Process CPU, µs. */
  cpuUs: number
  /** performance.now() of the reading. */
  at: number
  spansExported: number
  spansDropped: number
}

function sum (text: string, re: RegExp): number {
  return [...text.matchAll(re)].reduce((a, m) => a + Number(m[1]), 0)
}

export async function readGateway (adminUrl: string, pid: number | undefined): Promise<GatewayReading> {
  try {
    const text = await (await fetch(`${adminUrl}/metrics`)).text()
    const at = performance.now()
    const cpu = sum(text, /^process_cpu_(?:user|system)_seconds_total (\S+)$/gm)
    return {
      cpuUs: cpu > 0 ? cpu * 1e6 : cpuMicros(pid),
      at,
      spansExported: sum(text, /^gateway_trace_spans_exported_total (\S+)$/gm),
      spansDropped: sum(text, /^gateway_trace_spans_dropped_total\{[^}]*\} (\S+)$/gm)
    }
  } catch {
    // A baseline checkout from before tracing has no span counters.
    return { cpuUs: cpuMicros(pid), at: performance.now(), spansExported: NaN, spansDropped: NaN }
  }
}

/** An idle gap shorter than this (a pair run twice in a row) says more about the last window's tail than about idling. */
export const MIN_IDLE_MS = 2_000

/**
 * A gateway's CPU over its load windows, each net of an idle rate: its own, measured over the gaps
 * between its windows that are long enough (the last such rate kept for a window right after
 * another), or another gateway's — a traced row takes its twin's, since its own idle time holds the
 * export of the spans its requests made, which is theirs to pay.
 */
export class NetCpu {
  #last: GatewayReading | undefined
  idlePerMs = 0

  /** The reading that starts an idle gap (before the first window, or after a window). */
  idleFrom (reading: GatewayReading): void {
    this.#last = reading
  }

  /** A window begins at `before`: the idle gap since the last reading, if long enough, updates the idle rate. */
  begin (before: GatewayReading): void {
    const last = this.#last
    if (last !== undefined && before.at - last.at >= MIN_IDLE_MS) this.idlePerMs = Math.max(0, (before.cpuUs - last.cpuUs) / (before.at - last.at))
  }

  /** µs of CPU between `before` and `after`, less the idle rate (`idlePerMs`, or this gateway's); `after` starts the next idle gap. */
  end (before: GatewayReading, after: GatewayReading, idlePerMs?: number): number {
    this.#last = after
    return Math.max(0, after.cpuUs - before.cpuUs - (idlePerMs ?? this.idlePerMs) * (after.at - before.at))
  }
}
