// What the Redis store needs from Redis and from the process it runs in, as one narrow seam: ioredis
// and Node's timers in production (ioredis-port.ts), a modelled Redis and one virtual clock in the
// fault simulator (test/helpers/sim/), so the code simulated is the code that runs in production.

/** A Lua script as Redis knows it: its source and SHA-1. */
export interface Script { readonly name: string, readonly lua: string, readonly sha: string }

export interface RedisPort {
  /** Runs `script` on the shard holding `keys[0]` (all keys share its slot); rejects on any failure. */
  run: (script: Script, keys: readonly string[], args: readonly string[]) => Promise<unknown>
  /** Every shard known now: [''] for a single Redis, each master of a Cluster. */
  shards: () => string[]
  /** The shard holding `key` (a Cluster master, `host:port`); '' for a single Redis. */
  shardOf: (key: string) => string
  /** Keys of one group may share one script call: '' on a single Redis, the slot on a Cluster. */
  groupOf: (key: string) => string
  /** A key on `shard` (its tag picks the shard) where the epoch mark lives. */
  epochKey: (shard: string) => string
  /** A round trip to `shard`; rejects when it does not answer. */
  ping: (shard: string) => Promise<void>
  /** Tells `listener` when a shard's connection drops (its calls in flight fail) or is ready again. */
  watch: (listener: (shard: string, up: boolean) => void) => void
}

/** Time and timers, injected: real ones in production, the simulator's virtual ones in tests. */
export interface Runtime {
  /** A monotonic clock, ms (never steps back). */
  now: () => number
  /** Runs `fn` after `ms`; the returned function cancels it. */
  after: (ms: number, fn: () => void) => () => void
  /** Runs `fn` once the current event-loop turn has read every request it will (Node: setImmediate). */
  turnEnd: (fn: () => void) => void
  /** Random hex for ids (holder, epoch marks). */
  randomId: () => string
}
