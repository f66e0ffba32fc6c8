// Where the gateway's log lines go, such that a failing destination costs log lines and nothing
// else (issue 39, row 2). pino's synchronous destination writes with write(2) on the event loop:
// a pipe whose reader stops reading (a slow log shipper) blocks that write — the whole process with
// it, both listeners and the SIGTERM handler — and a reader that exits (EPIPE) left the gateway
// answering nothing. Here:
// - a pipe or socket (`node server | shipper`, a container runtime's log pipe) is written without
//   blocking: lines are batched, handed to a non-blocking stream, and while more than
//   `backlogBytes` wait for the reader, new lines are dropped;
// - a file or terminal is written synchronously (it does not stall on a reader); a write that fails
//   (a full disk, EIO) drops its lines;
// - after EPIPE (or any error of the stream) every further line is dropped.
// Every dropped line is counted: gateway_log_lines_dropped_total.
import { fstatSync, writeSync } from 'node:fs'
import { Socket } from 'node:net'
import { DEFAULT_LOG_BACKLOG_BYTES } from '../runtime/settings.js'

export interface LogDestinationOptions {
  /** File descriptor written to. */
  fd: number
  /** Lines are batched up to this many bytes before a write; 0: every line is written at once. */
  bufferBytes: number
  backlogBytes?: number
}

/** The part of a stream the destination uses: a pipe's non-blocking socket. */
type Stream = Pick<Socket, 'write' | 'writableLength' | 'destroyed'>

export class LogDestination {
  readonly #fd: number
  readonly #bufferBytes: number
  readonly #backlogBytes: number
  /** A pipe or socket: written through this non-blocking stream; undefined for files and terminals. */
  readonly #stream: Stream | undefined
  #pending = ''
  #pendingLines = 0
  #broken = false
  #dropped = 0

  constructor (opts: LogDestinationOptions) {
    this.#fd = opts.fd
    this.#bufferBytes = opts.bufferBytes
    this.#backlogBytes = opts.backlogBytes ?? DEFAULT_LOG_BACKLOG_BYTES
    this.#stream = isPipe(opts.fd) ? openNonBlocking(opts.fd, () => { this.#broken = true }) : undefined
  }

  /** Log lines lost since start: not taken by a failing or full destination. */
  get dropped (): number {
    return this.#dropped
  }

  /** pino's one call per line. */
  write (line: string): void {
    if (this.#broken) {
      this.#dropped++
      return
    }
    this.#pending += line
    this.#pendingLines++
    if (this.#pending.length >= this.#bufferBytes) this.flushSync()
  }

  /** pino's logger.flush(). */
  flush (cb?: (err?: Error) => void): void {
    this.flushSync()
    cb?.()
  }

  /** Hands the batch to the destination now; never blocks on a reader. */
  flushSync (): void {
    if (this.#pendingLines === 0) return
    const chunk = this.#pending
    const lines = this.#pendingLines
    this.#pending = ''
    this.#pendingLines = 0
    if (this.#broken) {
      this.#dropped += lines
      return
    }
    const stream = this.#stream
    if (stream === undefined) {
      this.#writeFile(chunk, lines)
      return
    }
    if (stream.destroyed || stream.writableLength + chunk.length > this.#backlogBytes) {
      this.#dropped += lines
      return
    }
    stream.write(chunk, (err) => { if (err !== null && err !== undefined) this.#dropped += lines })
  }

  /** On exit: what is still batched, in one attempt that cannot block (a pipe's backlog is lost, counted or not). */
  flushOnExit (): void {
    if (this.#stream === undefined) {
      this.flushSync()
      return
    }
    if (this.#pendingLines === 0 || this.#broken || this.#stream.writableLength > 0) return
    // Taken out of the batch either way: written once, or counted once (a later flush must not repeat them).
    const chunk = this.#pending
    const lines = this.#pendingLines
    this.#pending = ''
    this.#pendingLines = 0
    try {
      writeSync(this.#fd, chunk)
    } catch {
      // The pipe is full or gone: these lines are lost with the process.
      this.#dropped += lines
    }
  }

  #writeFile (chunk: string, lines: number): void {
    try {
      writeSync(this.#fd, chunk)
    } catch {
      // A full disk, an I/O error: these lines are lost, the next write tries again.
      this.#dropped += lines
    }
  }
}

function isPipe (fd: number): boolean {
  try {
    const stat = fstatSync(fd)
    return stat.isFIFO() || stat.isSocket()
  } catch {
    return false
  }
}

/**
 * A non-blocking stream on `fd`. Node's process.stdout / process.stderr set a pipe blocking when
 * they are first used (on Linux), and the flag belongs to the pipe, not to one handle: they are
 * created first, so that opening this handle (non-blocking) comes last.
 */
function openNonBlocking (fd: number, onBroken: () => void): Stream {
  if (fd === 1) void process.stdout.writable
  if (fd === 2) void process.stderr.writable
  const socket = new Socket({ fd, readable: false, writable: true })
  // A broken pipe ends the stream, never the descriptor (as Node does for process.stdout): closed,
  // its number would be handed to the next connection accepted, under process.stdout's handle.
  socket._destroy = (err, callback) => { callback(err) }
  socket.on('error', onBroken)
  socket.on('close', onBroken)
  // Never keeps the process alive: a log line waiting for a reader must not delay an exit.
  socket.unref()
  return socket
}
