// The gateway's pino logger. At info level every request writes one line, and one write(2) per line
// cost a noticeable share of the gateway's throughput under load (bench/results/design-figures.md).
// So lines are batched in memory up to `bufferBytes` and written synchronously in one write, at the
// latest every `flushMs` and always on exit — a crash loses at most that buffer, never blocks on it.
import { destination as pinoDestination, pino, type Logger } from 'pino'
import { LOG_REDACT_PATHS } from './request-log.js'
import { DEFAULT_LOG_BUFFER_BYTES } from '../runtime/settings.js'

export const DEFAULT_LOG_FLUSH_MS = 200

export interface GatewayLoggerOptions {
  level: string
  /** 0: one write per line. */
  bufferBytes?: number
  flushMs?: number
  /** File descriptor written to (default 1, stdout). */
  fd?: number
}

export function createGatewayLogger (opts: GatewayLoggerOptions): Logger {
  const bufferBytes = opts.bufferBytes ?? DEFAULT_LOG_BUFFER_BYTES
  const destination = pinoDestination({ dest: opts.fd ?? 1, sync: true, minLength: bufferBytes })
  const logger = pino({ level: opts.level, redact: LOG_REDACT_PATHS, base: { service: 'gateway', pid: process.pid } }, destination)
  if (bufferBytes > 0) {
    const flush = (): void => { destination.flushSync() }
    setInterval(flush, opts.flushMs ?? DEFAULT_LOG_FLUSH_MS).unref()
    process.once('exit', flush)
  }
  return logger
}
