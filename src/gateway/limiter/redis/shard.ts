// The fault handling of the Redis path, in one place: a state machine per shard (a Cluster master,
// or the one Redis; drawn in docs/limiter-internals.md). Grant calls go to a shard only while it is
// `up`; a failed or late call or a dropped connection makes it `down`, probed until it answers; then
// `recovering` reads its epoch mark (lua/epoch.lua). A mark other than the one this process saw
// means the shard lost its data: this process re-seeds what it admitted there, and no process grants
// there until the mark's time plus the recovery barrier, by which every process has re-seeded.
import { createShardClock, type ShardClock } from './clock.js'
import { withinBudget } from './outage.js'
import type { RedisPort, Runtime } from './port.js'
import { EPOCH } from './scripts.js'

export type ShardState = 'recovering' | 'up' | 'down'

/** STORE_RECOVERY_BARRIER_MS: after a shard lost its data, no grant there before its epoch mark's time plus this. */
export const DEFAULT_RECOVERY_BARRIER_MS = 2_000
/** A down shard's first probe, doubling up to DEFAULT_PROBE_MAX_MS. */
export const DEFAULT_PROBE_FIRST_MS = 50
export const DEFAULT_PROBE_MAX_MS = 1_000

/** A shard, with its probing: the next probe's delay, its timer, and the recovery run under way. */
export interface Shard {
  readonly name: string
  readonly clock: ShardClock
  state: ShardState
  /** Local time of the last change of state (diagnostics: how long a refusal came after it). */
  changedAt: number
  /** The epoch mark last seen; undefined before the first. */
  epoch: string | undefined
  backoff: number
  cancel: (() => void) | undefined
  run: number
}

export interface ShardOptions {
  port: RedisPort
  runtime: Runtime
  /** STORE_TIMEOUT_MS: a probe or an epoch read may take the larger of this and half the barrier. */
  timeoutMs: number
  barrierMs?: number | undefined
  /** Re-seeds this process's admissions on `shard`, which lost its data; rejects if it could not. */
  reseed: (shard: string) => Promise<void>
  /** Every change of state, and why (logs, metrics). */
  onShardChange?: ((shard: string, state: ShardState, reason: string) => void) | undefined
}

export type Shards = ReturnType<typeof createShards>

export function createShards (opts: ShardOptions) {
  const { port, runtime } = opts
  const barrierMs = opts.barrierMs ?? DEFAULT_RECOVERY_BARRIER_MS
  const shards = new Map<string, Shard>()
  let closed = false
  const anyDown = (): boolean => [...shards.values()].some((shard) => shard.state !== 'up')

  function set (shard: Shard, state: ShardState, reason: string): void {
    if (shard.state === state) return
    shard.state = state
    shard.changedAt = runtime.now()
    opts.onShardChange?.(shard.name, state, reason)
  }

  // Probes and epoch reads are off the request path: half the barrier, not the request budget (a link slow
  // for a moment after a restart must not make a process re-seed after the barrier, docs/limiter-internals.md).
  const recoveryMs = Math.max(opts.timeoutMs, barrierMs / 2)
  const bounded = <T>(call: Promise<T>): Promise<T> => withinBudget(call, recoveryMs, runtime.after)

  async function recover (shard: Shard): Promise<void> {
    const run = ++shard.run
    set(shard, 'recovering', 'answering again')
    try {
      const sent = runtime.now()
      // The mark's value, when it was set and Redis's time (lua/epoch.lua).
      const [value, markedAt, redisNow] = await bounded(port.run(EPOCH, [port.epochKey(shard.name)], [runtime.randomId()])) as [string, number, number]
      const [at, now, received] = [Number(markedAt), Number(redisNow), runtime.now()]
      shard.clock.learn(now, sent, received)
      if (run !== shard.run) return
      const lost = shard.epoch !== undefined && shard.epoch !== String(value)
      // The new mark is taken only once the re-seed succeeded: a re-seed that fails (a call refused, the link
      // lost half-way) leaves the old mark, so the next recovery finds the loss again and re-seeds again.
      if (lost) await opts.reseed(shard.name)
      if (run !== shard.run) return
      shard.epoch = String(value)
      // No grant before the mark's time + the barrier, by Redis's clock at its earliest.
      const wait = at + barrierMs - (now - received) - runtime.now()
      if (wait > 0) await new Promise<void>((resolve) => runtime.after(wait, resolve))
      if (run === shard.run && shard.state === 'recovering' && !closed) set(shard, 'up', 'recovered')
    } catch (err) {
      if (run === shard.run) down(shard, `recovery failed: ${(err as Error).message}`)
    }
  }

  function probe (shard: Shard): void {
    shard.cancel?.()
    shard.cancel = undefined
    if (closed || shard.state !== 'down') return
    bounded(port.ping(shard.name)).then(() => { if (shard.state === 'down' && !closed) void recover(shard) }, () => {
      shard.backoff = Math.min(DEFAULT_PROBE_MAX_MS, shard.backoff * 2)
      shard.cancel = runtime.after(shard.backoff, () => { probe(shard) })
    })
  }

  function down (shard: Shard, reason: string): void {
    if (closed) return
    shard.run++
    if (shard.state === 'down') return
    set(shard, 'down', reason)
    shard.backoff = DEFAULT_PROBE_FIRST_MS
    shard.cancel = runtime.after(shard.backoff, () => { probe(shard) })
  }

  function of (name: string): Shard {
    let shard = shards.get(name)
    if (shard === undefined) {
      shard = { name, clock: createShardClock(), state: 'recovering', changedAt: runtime.now(), epoch: undefined, backoff: DEFAULT_PROBE_FIRST_MS, cancel: undefined, run: 0 }
      shards.set(name, shard)
      void recover(shard)
    }
    return shard
  }

  port.watch((name, up) => {
    const shard = of(name)
    if (!up) down(shard, 'connection lost')
    else if (shard.state === 'down') probe(shard)
  })

  return {
    of,
    /** How long a probe or an epoch read may take: a recovery's round trips fit in it (calls.ts's refusals wait as long). */
    recoveryMs,
    /** A call to `name` failed or timed out: down, probing until it answers. */
    fail: (name: string, reason: string) => { down(of(name), reason) },
    /** A reply from `name` arrived after its call was given up: probe at once. */
    answered (name: string) {
      const shard = of(name)
      if (shard.state === 'down') probe(shard)
    },
    /** Resolves once every shard known is up, or after `ms`. */
    async settled (ms: number) {
      const deadline = runtime.now() + ms
      while (runtime.now() < deadline && anyDown()) await new Promise<void>((resolve) => runtime.after(10, resolve))
    },
    anyDown,
    close () {
      closed = true
      for (const shard of shards.values()) shard.cancel?.()
    }
  }
}
