// The messages between the config parser (worker-loader.ts) and its worker thread (parse-worker.ts),
// shared by both sides.
import type { KeyRecord } from './types.js'
import type { ConfigWithoutKeys } from './loader.js'

/**
 * Files bigger than this in total are parsed at the lowest CPU priority (a small config must still
 * apply within a second on a busy machine, a big one must not take CPU from requests), and the
 * worker that parsed them is then replaced, to give back its memory and its priority.
 */
export const BIG_CONFIG_BYTES = 1024 * 1024

export type ToWorker =
  | { kind: 'load', dir: string, maxBytes: number, maxProblems: number }
  /** The main thread has taken the last slice of keys and wants the next one. */
  | { kind: 'next' }
  /** Answered with `ready`: the worker is loaded. */
  | { kind: 'ping' }

export type FromWorker =
  /** Loaded and listening: sent when the worker starts, and in answer to `ping`. */
  | { kind: 'ready' }
  /** A slice of the keys, [digest, record], in file order; the worker waits for `next`. */
  | { kind: 'keys', keys: Array<[string, KeyRecord]> }
  /** The rest of a valid config (the keys came in the slices); `bytes`: the files' total size. */
  | { kind: 'done', config: ConfigWithoutKeys, bytes: number }
  | { kind: 'rejected', problems: string[], bytes: number }
  /** Not a config problem: a bug or an I/O failure the loader did not expect. */
  | { kind: 'failed', message: string }
