// Loads CONFIG_DIR in a worker thread (parse-worker.ts) for a live reload: reading, YAML parsing and
// validating cost seconds and gigabytes on a huge or hostile file, and none of it may run on the
// event loop that serves requests. The worker's heap is capped, so a file that would need more fails
// the reload instead of the process, and it parses big files at the lowest CPU priority. The worker
// starts with the first reload (~70 ms built, up to seconds under tsx: nothing at start-up) and is
// kept for the next; after a load of big files, or any failure, it is replaced (started again lazily),
// so the memory and the priority a big parse took go with it.
import { Worker } from 'node:worker_threads'
import { DEFAULT_CONFIG_MAX_BYTES } from '../runtime/settings.js'
import { buildSnapshot, ConfigError, DEFAULT_MAX_REPORTED_PROBLEMS, freezeKey } from './loader.js'
import type { ConfigSnapshot, KeyRecord } from './types.js'
import { BIG_CONFIG_BYTES, type FromWorker, type ToWorker } from './worker-protocol.js'

/** Old-generation heap of the parse worker; parsing a 10 MB YAML file takes under 1 GB. */
export const DEFAULT_CONFIG_WORKER_HEAP_MB = 2048
/** A parse still running after this long is stopped and the reload rejected. */
export const DEFAULT_CONFIG_PARSE_TIMEOUT_MS = 60_000

// Under tsx (npm start, tests) this module is TypeScript and so is the worker, which then needs the
// TypeScript loader and nothing else of what the parent was started with (a test runner's loaders
// made a worker take 4.5 s to start instead of 0.5 s); built, both are JavaScript.
const RUNNING_TYPESCRIPT = import.meta.url.endsWith('.ts')
const WORKER_URL = new URL(RUNNING_TYPESCRIPT ? './parse-worker.ts' : './parse-worker.js', import.meta.url)
const WORKER_EXEC_ARGV = RUNNING_TYPESCRIPT ? ['--import', import.meta.resolve('tsx')] : []

export interface WorkerLoadOptions {
  /** CONFIG_MAX_BYTES, per file. */
  maxBytes?: number
  maxProblems?: number
  heapMb?: number
  timeoutMs?: number
}

export interface ConfigParser {
  /** The snapshot of `dir`, or a ConfigError naming every problem (capped); one load at a time. */
  load: (dir: string) => Promise<ConfigSnapshot>
  /** Starts the worker now instead of at the first load (it is started lazily: no cost at start-up). */
  ready: () => Promise<void>
  close: () => Promise<void>
}

export function createConfigParser (opts: WorkerLoadOptions = {}): ConfigParser {
  const heapMb = opts.heapMb ?? DEFAULT_CONFIG_WORKER_HEAP_MB
  const timeoutMs = opts.timeoutMs ?? DEFAULT_CONFIG_PARSE_TIMEOUT_MS
  let worker: Worker | undefined
  let closed = false
  let queue: Promise<unknown> = Promise.resolve()

  function spawn (): Worker {
    const w = new Worker(WORKER_URL, { execArgv: WORKER_EXEC_ARGV, resourceLimits: { maxOldGenerationSizeMb: heapMb } })
    w.unref()
    // Errors of an idle worker surface on the next load, which gets a fresh one.
    w.on('error', () => { if (worker === w) worker = undefined })
    w.on('exit', () => { if (worker === w) worker = undefined })
    return w
  }

  function retire (w: Worker): void {
    if (worker === w) worker = undefined
    void w.terminate()
  }

  async function loadOnce (dir: string): Promise<ConfigSnapshot> {
    if (closed) throw new Error('config parser closed')
    const w = worker ?? (worker = spawn())
    const keysByDigest = new Map<string, KeyRecord>()
    const keysById = new Map<string, KeyRecord>()
    return await new Promise<ConfigSnapshot>((resolve, reject) => {
      let settled = false
      const timer = setTimeout(() => fail(new ConfigError([`config: not parsed within ${timeoutMs} ms; the parse was stopped`])), timeoutMs)
      function cleanUp (): void {
        settled = true
        clearTimeout(timer)
        w.off('message', onMessage)
        w.off('error', onError)
        w.off('exit', onExit)
      }
      function fail (err: Error): void {
        if (settled) return
        cleanUp()
        retire(w)
        reject(err)
      }
      function succeed (snapshot: ConfigSnapshot, bytes: number): void {
        cleanUp()
        if (bytes > BIG_CONFIG_BYTES) retire(w)
        resolve(snapshot)
      }
      function onMessage (reply: FromWorker): void {
        switch (reply.kind) {
          case 'ready':
            break
          case 'keys':
            for (const [digest, record] of reply.keys) {
              const frozen = freezeKey(record)
              keysByDigest.set(digest, frozen)
              keysById.set(frozen.id, frozen)
            }
            // The next slice only after the event loop has served whatever is waiting.
            setImmediate(() => { if (!settled) w.postMessage({ kind: 'next' } satisfies ToWorker) })
            break
          case 'done':
            succeed(buildSnapshot(reply.config, Date.now(), keysByDigest, keysById), reply.bytes)
            break
          case 'rejected':
            cleanUp()
            if (reply.bytes > BIG_CONFIG_BYTES) retire(w)
            reject(new ConfigError(reply.problems))
            break
          case 'failed':
            fail(new Error(`config worker failed: ${reply.message}`))
        }
      }
      function onError (err: Error & { code?: string }): void {
        fail(err.code === 'ERR_WORKER_OUT_OF_MEMORY'
          ? new ConfigError([`config: parsing needed more than the worker's ${heapMb} MB heap; the files are too large or too deeply nested`])
          : err)
      }
      function onExit (code: number): void {
        fail(new Error(`config worker exited (code ${code}) before answering`))
      }
      w.on('message', onMessage)
      w.on('error', onError)
      w.on('exit', onExit)
      w.postMessage({
        kind: 'load',
        dir,
        maxBytes: opts.maxBytes ?? DEFAULT_CONFIG_MAX_BYTES,
        maxProblems: opts.maxProblems ?? DEFAULT_MAX_REPORTED_PROBLEMS
      } satisfies ToWorker)
    })
  }

  /** Starts a worker unless one is there, and resolves once it is loaded (or failed to start: a load then starts another). */
  async function ready (): Promise<void> {
    if (closed) return
    const w = worker ?? (worker = spawn())
    await new Promise<void>((resolve) => {
      const done = (): void => {
        w.off('message', onReady)
        w.off('error', done)
        w.off('exit', done)
        resolve()
      }
      const onReady = (m: FromWorker): void => { if (m.kind === 'ready') done() }
      w.on('message', onReady)
      w.once('error', done)
      w.once('exit', done)
      // Already loaded: it answers a ping of its own kind at once (see parse-worker.ts).
      w.postMessage({ kind: 'ping' } satisfies ToWorker)
    })
  }

  return {
    ready,
    async load (dir) {
      const result = queue.then(async () => await loadOnce(dir))
      queue = result.catch(() => undefined)
      return await result
    },
    async close () {
      closed = true
      const w = worker
      worker = undefined
      if (w !== undefined) await w.terminate()
    }
  }
}
