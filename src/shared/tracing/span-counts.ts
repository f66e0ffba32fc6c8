// What became of the spans a service ended: exported, or dropped and why. Counted by the SDK module
// (sdk.ts, loaded only with tracing on) and read by the gateway's metrics at scrape time, which must
// not load the SDK to know that nothing was dropped.

/** `queue_full`: the export queue was at OTEL_BSP_MAX_QUEUE_SIZE; `export_failed`: the collector was down, slow or refused. */
export const DROP_REASONS = ['queue_full', 'export_failed'] as const
export type DropReason = (typeof DROP_REASONS)[number]

export interface SpanCounts {
  exported: number
  dropped: Record<DropReason, number>
}

export function emptySpanCounts (): SpanCounts {
  return { exported: 0, dropped: { queue_full: 0, export_failed: 0 } }
}
