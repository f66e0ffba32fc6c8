// The worker thread that reads, parses and validates CONFIG_DIR for the gateway, off its event loop
// (parsing a big file on it stalls every request for as long: bench/results/design-figures.md). It
// hands the keys back in slices, one slice each time the main thread asks, so that taking in a
// hundred thousand keys never holds the event loop for longer than one slice's decoding.
import { setPriority } from 'node:os'
import { parentPort } from 'node:worker_threads'
import { ConfigError, validateConfig, type ConfigTexts } from './loader.js'
import { readConfigTexts } from './read-files.js'
import { BIG_CONFIG_BYTES, type FromWorker, type ToWorker } from './worker-protocol.js'

/** Keys per message: small enough that decoding one message (structured clone) is a short pause of the event loop. */
export const KEYS_PER_MESSAGE = 2_000

/** Nice value of this thread while it parses big files: the threads serving requests come first. */
export const WORKER_NICE = 19

let askedForNext: (() => void) | undefined

function post (reply: FromWorker): void {
  parentPort?.postMessage(reply)
}

async function nextRequested (): Promise<void> {
  await new Promise<void>((resolve) => { askedForNext = resolve })
}

function sizeOf (texts: ConfigTexts): number {
  return Object.values(texts).reduce((sum, text) => sum + Buffer.byteLength(text), 0)
}

async function load (dir: string, maxBytes: number, maxProblems: number): Promise<void> {
  let bytes = 0
  try {
    const texts = readConfigTexts(dir, maxBytes)
    bytes = sizeOf(texts)
    if (bytes > BIG_CONFIG_BYTES) {
      // On Linux, setpriority for "process 0" sets the calling thread only: this worker, not the
      // gateway. It cannot be raised back, so the main thread replaces this worker afterwards.
      try {
        setPriority(WORKER_NICE)
      } catch {
        // not permitted here: the parse still runs off the event loop, at normal priority
      }
    }
    const { keys, ...rest } = validateConfig(texts, maxProblems)
    for (let i = 0; i < keys.length; i += KEYS_PER_MESSAGE) {
      post({ kind: 'keys', keys: keys.slice(i, i + KEYS_PER_MESSAGE) })
      await nextRequested()
    }
    post({ kind: 'done', config: rest, bytes })
  } catch (err) {
    if (err instanceof ConfigError) post({ kind: 'rejected', problems: [...err.problems], bytes })
    else post({ kind: 'failed', message: err instanceof Error ? err.message : String(err) })
  }
}

parentPort?.on('message', (message: ToWorker) => {
  if (message.kind === 'next') {
    askedForNext?.()
    askedForNext = undefined
  } else if (message.kind === 'ping') {
    post({ kind: 'ready' })
  } else {
    void load(message.dir, message.maxBytes, message.maxProblems)
  }
})
post({ kind: 'ready' })
