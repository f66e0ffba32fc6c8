// Loads CONFIG_DIR in a worker thread (parse-worker.ts) for every reload: reading, YAML parsing and
// validating cost seconds and gigabytes on a huge or hostile file, and none of it may run on the event
// loop that serves requests. The worker's heap is capped, so a file that would need more fails the load
// instead of the process, and it parses big files at the lowest CPU priority. A worker is started by a
// load (or `ready`) and kept for the next; after a load of big files, or any failure, or `release`, it
// is stopped (and started again by the next load), so the memory and the priority a big parse took go
// with it. A load before the process serves anything (its start, a one-off check) reads and validates
// files of BIG_CONFIG_BYTES or less on the calling thread, with the same code: nothing waits behind it,
// and a worker's start costs more than such a parse (about 0.15 s of CPU, 0.12 s to readiness and 13 MB
// of resident memory on the fixture config; docs/development.md); bigger files go to the worker.
import { Worker } from 'node:worker_threads'
import { buildSnapshot, ConfigError, DEFAULT_MAX_REPORTED_PROBLEMS, KeyIndex } from './loader.js'
import { configBytesOnDisk, DEFAULT_CONFIG_MAX_BYTES, loadConfigDir } from './read-files.js'
import type { ConfigSnapshot } from './types.js'
import { BIG_CONFIG_BYTES, type FromWorker, type ToWorker } from './worker-protocol.js'

/** Old-generation heap of the parse worker: room for a file at the size cap (bench/results/design-figures.md). */
export const DEFAULT_CONFIG_WORKER_HEAP_MB = 2048
/** A parse still running after this long (from the moment a started worker gets the load) is stopped and the load rejected. */
export const DEFAULT_CONFIG_PARSE_TIMEOUT_MS = 60_000
/** Starting the worker comes before that timeout: a start-up waits this much longer for the first load (app.ts pluginTimeout). */
export const CONFIG_WORKER_START_MARGIN_MS = 30_000

// From source (npm start, tests) this module is TypeScript and so is the worker, which then needs the
// resolve hook the sources run with (src/ts-resolve.ts) and nothing else of what the parent was started
// with (a test runner's loaders made a worker start several times slower); built, both are JavaScript.
const RUNNING_TYPESCRIPT = import.meta.url.endsWith('.ts')
const WORKER_URL = new URL(RUNNING_TYPESCRIPT ? './parse-worker.ts' : './parse-worker.js', import.meta.url)
const WORKER_EXEC_ARGV = RUNNING_TYPESCRIPT ? ['--import', new URL('../../ts-resolve.ts', import.meta.url).href] : []

export interface WorkerLoadOptions {
  /** CONFIG_MAX_BYTES, per file. */
  maxBytes?: number
  maxProblems?: number
  heapMb?: number
  timeoutMs?: number
}

export interface ConfigParserOptions extends WorkerLoadOptions {
  /** The gateway's clock, Unix ms: stamps each snapshot's `loadedAt`. */
  now: () => number
}

export interface ConfigParser {
  /** The snapshot of `dir`, or a ConfigError naming every problem (capped); one load at a time. */
  load: (dir: string) => Promise<ConfigSnapshot>
  /** As `load`, for a process that serves nothing yet: files of BIG_CONFIG_BYTES or less on this thread. */
  loadBeforeServing: (dir: string) => Promise<ConfigSnapshot>
  /** Starts the worker now instead of at the next load. */
  ready: () => Promise<void>
  /** Stops the worker until the next load (its memory is given back meanwhile). */
  release: () => void
  close: () => Promise<void>
}

export function createConfigParser (opts: ConfigParserOptions): ConfigParser {
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
    // The time allowed is the parse's: a worker is started (and its modules loaded) before it counts.
    await ready()
    const started = worker
    if (started === undefined) throw new Error('config worker exited before it was ready')
    const w: Worker = started
    const keys = new KeyIndex()
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
            keys.addAll(reply.keys)
            // The next slice only after the event loop has served whatever is waiting.
            setImmediate(() => { if (!settled) w.postMessage({ kind: 'next' } satisfies ToWorker) })
            break
          case 'done':
            succeed(buildSnapshot(reply.config, keys, opts.now()), reply.bytes)
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

  /** A load on this thread when the files are small (nothing is served meanwhile: the caller's promise), else the worker's. */
  function loadHere (dir: string): Promise<ConfigSnapshot> | ConfigSnapshot {
    if (closed) throw new Error('config parser closed')
    if (configBytesOnDisk(dir) > BIG_CONFIG_BYTES) return loadOnce(dir)
    return loadConfigDir(dir, { loadedAt: opts.now(), maxBytes: opts.maxBytes, maxProblems: opts.maxProblems })
  }

  /** Runs `load` once the loads already asked for are over: one load at a time, whichever thread it runs on. */
  async function inTurn (load: () => Promise<ConfigSnapshot> | ConfigSnapshot): Promise<ConfigSnapshot> {
    const result = queue.then(async () => await load())
    queue = result.catch(() => undefined)
    return await result
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
    release () {
      // After the loads already asked for, not in the middle of one.
      queue = queue.then(() => { if (worker !== undefined) retire(worker) })
    },
    load: async (dir) => await inTurn(() => loadOnce(dir)),
    loadBeforeServing: async (dir) => await inTurn(() => loadHere(dir)),
    async close () {
      closed = true
      const w = worker
      worker = undefined
      if (w !== undefined) await w.terminate()
    }
  }
}
