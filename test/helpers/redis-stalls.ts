// How long a Redis server kept a client waiting, seen from a process of its own (redis-cli's latency
// mode: a PING every 10 ms, the slowest round trip of each second). A test that asserts "no store
// timeout" needs it: a timeout means Redis answered nothing for STORE_TIMEOUT_MS, which a healthy
// Redis does only when a busy machine leaves it no CPU — measured here, outside the gateway's event
// loop, so a gateway that is busy itself cannot excuse its own false timeouts.
import { execFile } from 'node:child_process'

/** Seconds per redis-cli sample: it prints `min max avg samples` (ms) at the end of each. */
const SAMPLE_SECONDS = 1

function sample (port: number): Promise<number> {
  return new Promise((resolve) => {
    execFile('redis-cli', ['-h', '127.0.0.1', '-p', String(port), '--latency', '--raw', '-i', String(SAMPLE_SECONDS)], { timeout: 10_000 }, (err, stdout) => {
      const max = Number(stdout.trim().split(/\s+/)[1])
      resolve(err === null && Number.isFinite(max) ? max : Infinity)
    })
  })
}

export interface StallWatch {
  /** Stops sampling (after the sample under way) and gives the slowest round trip seen, in ms. */
  stop: () => Promise<number>
}

/** Samples Redis's round trip from another process until `stop`. */
export function watchRedisStalls (port: number): StallWatch {
  let running = true
  let slowest = 0
  const loop = (async () => {
    while (running) slowest = Math.max(slowest, await sample(port))
  })()
  return {
    stop: async () => {
      running = false
      await loop
      return slowest
    }
  }
}
