// The gateway's pino logger. At info level every request writes one line, and one write(2) per line
// cost a noticeable share of the gateway's throughput under load (bench/results/design-figures.md).
// So lines are batched in memory up to `bufferBytes` and written in one write, at the latest every
// `flushMs` and on exit. Where they are written is log-destination.ts: a destination that fails or
// stops reading (EPIPE, a full disk, a slow log shipper) loses lines, counted, and never blocks the
// process — its listeners and its signal handling go on (issue 39, row 2).
import { pino, type Logger } from 'pino'
import { LOG_REDACT_PATHS } from './request-log.js'
import { DEFAULT_LOG_BUFFER_BYTES } from '../runtime/settings.js'
import { LogDestination } from './log-destination.js'
import { requestLineWriter, type RequestLineWriter } from './request-line.js'

export const DEFAULT_LOG_FLUSH_MS = 200

export interface GatewayLoggerOptions {
  level: string
  /** 0: one write per line. */
  bufferBytes?: number
  flushMs?: number
  /** File descriptor written to (default 1, stdout). */
  fd?: number
  /** A pipe's lines waiting for its reader, in bytes, beyond which new lines are dropped. */
  backlogBytes?: number
}

export interface GatewayLogger {
  logger: Logger
  /** Log lines lost since start (gateway_log_lines_dropped_total). */
  linesDropped: () => number
  /** Each request's line, written in pino's format without pino's serializer (request-line.ts). */
  requestLine: RequestLineWriter
}

/** The logger and its count of lost lines (server.ts hands the count to the metrics). */
export function createGatewayLogging (opts: GatewayLoggerOptions): GatewayLogger {
  const bufferBytes = opts.bufferBytes ?? DEFAULT_LOG_BUFFER_BYTES
  const destination = new LogDestination({ fd: opts.fd ?? 1, bufferBytes, backlogBytes: opts.backlogBytes })
  const logger = pino({ level: opts.level, redact: LOG_REDACT_PATHS, base: { service: 'gateway', pid: process.pid } }, destination)
  if (bufferBytes > 0) setInterval(() => { destination.flushSync() }, opts.flushMs ?? DEFAULT_LOG_FLUSH_MS).unref()
  process.once('exit', () => { destination.flushOnExit() })
  // Node's own writers on the same pipes (warnings, console.error): their EPIPE is not an error of
  // the gateway's — unhandled, it would be an uncaught exception and stop the process.
  process.stdout.on('error', () => {})
  process.stderr.on('error', () => {})
  return { logger, linesDropped: () => destination.dropped, requestLine: requestLineWriter((line) => { destination.write(line) }) }
}

/** The logger alone, for a caller that does not export the count. */
export function createGatewayLogger (opts: GatewayLoggerOptions): Logger {
  return createGatewayLogging(opts).logger
}
