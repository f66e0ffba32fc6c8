// One gateway process in the simulator: the production Redis path (src/gateway/limiter/redis/
// grants.ts and everything under it) on a port and runtime of the world's — its own clock (offset
// and drift), timers and end-of-turn on the world's queue, and one connection to each modelled Redis
// node (the one Redis, or each node of a Cluster: topology.ts)
// whose commands and replies take the network's time, drop when the server dies or the link resets
// (every call in flight fails, replies of calls Redis already ran are lost), and reconnect later.
// A stalled process (a blocked event loop) handles nothing until the stall ends — then its timers
// first, as Node's loop does. Every admission is recorded at the virtual instant it is made.
import { createGrants, type Grants } from '../../../src/gateway/limiter/redis/grants.js'
import type { OutageAllowance, StoreOnError } from '../../../src/gateway/limiter/redis/outage.js'
import type { RedisPort, Runtime } from '../../../src/gateway/limiter/redis/port.js'
import type { Ask, ConsumeResult } from '../../../src/gateway/limiter/store.js'
import { limiterKey } from '../../../src/gateway/redis/keys.js'
import { GRANT } from '../../../src/gateway/limiter/redis/scripts.js'
import type { Topology } from './topology.js'
import { CHECK, IO, TIMER, type Owner, type World } from './world.js'

/** What fires a process's armed slow link (SimProcess.slowWhen). */
export type SlowTrigger = { kind: 'reserve-drop' } | { kind: 'backlog', minRequests: number, claim: () => boolean }

/** How long one way takes: a base, jitter, and now and then a slow stretch. */
export interface Net {
  base: number
  jitter: number
  /** Chance a message takes `slowMs` more (a congested moment). */
  slowChance: number
  slowMs: number
}

export interface ProcessOptions {
  policy: StoreOnError
  /** Under `local`: the outage allowance (the shipped share, over the schedule's processes). */
  allowance?: OutageAllowance
  timeoutMs: number
  barrierMs: number
  /** Local clock = offset + world time × (1 + drift). */
  offset: number
  drift: number
  net: Net
}

/** The requests entry `entry` (0-based) of a grant call's ARGV asks for (scripts.ts grantArgs: its fields' 4th). */
function requestsOf (args: readonly string[], entry: number): number {
  return Number(args[1 + 3 * entry]?.split(' ')[3] ?? 0)
}

export interface Admission {
  readonly consumer: string
  readonly t: number
  /** Redis's clock at the admission (differs from t + skew only when Redis's clock steps or drifts). */
  readonly redisT: number
  /**
   * Redis's clock when this request would have reached it with no wait in the limiter: the TIME of the first grant
   * call that carried it, less the time it waited in its process before that call was sent; for a request no call
   * carried (spent from units this process held), the store's clock at its decision. The network's delay moves it;
   * the limiter's own waits, holds and re-asks do not.
   */
  readonly reachedRedisAt: number
  readonly cost: number
  /**
   * How it was granted: `redis` (by a call of its own), `grant` (from units Redis counted for this process),
   * `reserve` (kept back in Redis for this process: within the limit), `allowance` (the outage allowance: over the
   * limit by at most the allowance), `fallback` (STORE_ON_ERROR=open: nothing counted).
   */
  readonly via: AdmissionSource
  /** The process that admitted it (its name). */
  readonly process: string
  /**
   * Set by the run, not the process: the instant a data loss forgot this admission — the loss of its consumer's
   * Redis after its process crashed, the process's ledger gone with it (outside the bound, docs/simulator.md).
   */
  readonly forgottenAt?: number
}

export type AdmissionSource = 'redis' | 'grant' | 'reserve' | 'allowance' | 'fallback'

/** How the limiter's result says it was granted. */
function sourceOf (result: ConsumeResult): AdmissionSource {
  if (result.via === 'fallback') return result.outageSource ?? 'fallback'
  return result.via ?? 'redis'
}

/** A grant reply: Redis's time, then these many fields per entry, the reserve the 5th (scripts.ts readGrantReply). */
const GRANT_REPLY_FIELDS = 17
const GRANT_REPLY_RESERVE = 4

export class SimProcess implements Owner {
  busyUntil = 0
  dead = false
  /** When it crashed (virtual ms): its ledger went with it. */
  crashedAt: number | undefined = undefined
  readonly admissions: Admission[] = []
  /** Requests refused (any outcome but `ok`), at the virtual instant of the answer; `reachedRedisAt` as an admission's (absent: no answer from the store). */
  readonly refusals: Array<{ readonly consumer: string, readonly t: number, readonly outcome: string, readonly reachedRedisAt?: number }> = []
  /** Per limiter key, the requests no grant call has carried yet: their arrival, and when the first call that does says they reached Redis. */
  private readonly notYetAsked = new Map<string, Array<{ readonly arrived: number, reachedRedisAt?: number }>>()
  /** Bans this process's requests started (a `ban_started` answer). */
  bansStarted = 0
  /** Requests answered: by outcome (`ok`, `rate_limited`, `key_banned`, `unavailable`). */
  readonly outcomes = new Map<string, number>()
  /** Requests still waiting for an answer. */
  waiting = 0
  /** The longest a request waited for its answer, from its arrival (virtual ms). */
  longestWait = 0
  /** The same less the time its process's loop was blocked meanwhile (the wait the limiter's own timing made). */
  longestUnblockedWait = 0
  /** The spans the loop was blocked, [from, to) in virtual ms (stall() merges into the last). */
  private readonly blocked: Array<[number, number]> = []
  readonly grants: Grants
  /** The connection to each node: up or not, its generation (a reconnect starts a new one), its calls in flight. */
  private readonly links = new Map<string, Link>()
  private readonly listeners: Array<(shard: string, up: boolean) => void> = []

  private readonly world: World
  private readonly topology: Topology
  readonly name: string
  private readonly opts: ProcessOptions

  constructor (world: World, topology: Topology, name: string, opts: ProcessOptions) {
    this.world = world
    this.topology = topology
    this.name = name
    this.opts = opts
    for (const shard of topology.shards) {
      const link: Link = { shard, up: topology.node(shard).state !== 'dead', gen: 0, lastReplyAt: 0, pending: new Set() }
      this.links.set(shard, link)
      topology.node(shard).onLifecycle((event) => {
        if (event === 'down') this.drop(link)
        else this.reconnectLater(link)
      })
    }
    const runtime: Runtime = {
      now: () => opts.offset + world.now * (1 + opts.drift),
      after: (ms, fn) => world.at(world.now + ms / (1 + opts.drift), fn, this, TIMER),
      turnEnd: (fn) => { world.at(world.now, fn, this, CHECK) },
      randomId: () => Math.floor(world.random() * 2 ** 48).toString(16)
    }
    // A Cluster client follows MOVED: a key's command goes to the node serving its slot now, and a call that
    // reaches a node after its slot moved away is not run there (that node answers MOVED) but on the slot's
    // owner, at once if it is running (the redirect's round trip is not modelled), else it fails.
    const port: RedisPort = {
      run: (script, keys, args) => {
        const shard = topology.nodeOf(keys[0]!)
        const sentAt = world.now
        return this.send(shard, () => {
          if (topology.crossSlot(keys)) throw new Error('CROSSSLOT Keys in request don\'t hash to the same slot')
          const owner = topology.nodeOf(keys[0]!)
          if (owner !== shard && topology.node(owner).state !== 'running') throw new Error(`MOVED to ${owner}, which does not answer`)
          const reply = topology.node(owner).runScript(script, keys, args)
          if (script.sha === GRANT.sha) { this.reservesSeen(keys, reply); this.backlogSeen(args); this.askedSeen(keys, args, reply, sentAt) }
          return reply
        })
      },
      shards: () => [...topology.shards],
      shardOf: (key) => topology.nodeOf(key),
      groupOf: (key) => topology.groupOf(key),
      epochKey: (shard) => topology.epochKey(shard),
      ping: async (shard) => { await this.send(shard, () => 'PONG') },
      watch: (listener) => { this.listeners.push(listener) }
    }
    this.grants = createGrants({ port, runtime, holder: name, timeoutMs: opts.timeoutMs, policy: opts.policy, allowance: opts.allowance, barrierMs: opts.barrierMs, anonymousMax: 100 })
  }

  /** A request of `id` arrives now. */
  request (id: string, ask: Ask): void {
    this.waiting++
    const arrived = this.world.now
    const asked: { readonly arrived: number, reachedRedisAt?: number } = { arrived }
    const key = limiterKey(id)
    const pending = this.notYetAsked.get(key) ?? []
    if (pending.length === 0) this.notYetAsked.set(key, pending)
    pending.push(asked)
    const answered = (): void => {
      this.waiting--
      const waited = this.world.now - arrived
      this.longestWait = Math.max(this.longestWait, waited)
      this.longestUnblockedWait = Math.max(this.longestUnblockedWait, waited - this.blockedWithin(arrived, this.world.now))
    }
    this.grants.consume(id, ask).then((result) => {
      answered()
      if (result.outcome === 'ban_started') this.bansStarted++
      const outcome = result.outcome === 'ban_started' ? 'key_banned' : result.outcome
      this.outcomes.set(outcome, (this.outcomes.get(outcome) ?? 0) + 1)
      const reachedRedisAt = asked.reachedRedisAt ?? result.now
      this.forgetAsked(key, asked)
      if (result.outcome === 'ok') this.admissions.push({ consumer: id, t: this.world.now, redisT: this.topology.node(this.topology.nodeOf(key)).time(), reachedRedisAt, cost: ask.cost, via: sourceOf(result), process: this.name })
      else this.refusals.push({ consumer: id, t: this.world.now, outcome, reachedRedisAt })
    }, () => {
      answered()
      this.forgetAsked(key, asked)
      this.refusals.push({ consumer: id, t: this.world.now, outcome: 'unavailable' })
      this.outcomes.set('unavailable', (this.outcomes.get('unavailable') ?? 0) + 1)
    })
  }

  /** The event loop is blocked for `ms`. */
  stall (ms: number): void {
    const from = Math.max(this.world.now, this.busyUntil)
    this.busyUntil = Math.max(this.busyUntil, this.world.now + ms)
    if (this.busyUntil <= from) return
    const last = this.blocked[this.blocked.length - 1]
    if (last !== undefined && last[1] >= from) last[1] = this.busyUntil
    else this.blocked.push([from, this.busyUntil])
  }

  /** How long the loop was blocked within [from, to). */
  private blockedWithin (from: number, to: number): number {
    let total = 0
    for (const [start, end] of this.blocked) total += Math.max(0, Math.min(end, to) - Math.max(start, from))
    return total
  }

  /** The link to Redis resets: calls in flight fail, and it reconnects a little later. */
  reset (): void {
    for (const link of this.links.values()) {
      this.drop(link)
      this.reconnectLater(link)
    }
  }

  /** The link to Redis is cut for `ms` (a partition): calls in flight fail, and it reconnects only then. */
  partition (ms: number): void {
    for (const link of this.links.values()) {
      this.drop(link)
      this.reconnectLater(link, ms)
    }
  }

  crash (): void {
    this.dead = true
    this.crashedAt = this.world.now
    for (const link of this.links.values()) this.drop(link)
  }

  /** Each key's reserve in the last grant reply Redis sent this process (read off the wire, as a packet capture would). */
  private readonly reserves = new Map<string, number>()
  /** `key`'s reserve in the last grant reply Redis sent this process (0 before any). */
  reserveSeen (key: string): number {
    return this.reserves.get(key) ?? 0
  }

  /** Armed by `slowWhen`: what fires it, how long the link is then slow, and by how much. */
  private armedSlow: { trigger: SlowTrigger, forMs: number, extraMs: number } | undefined = undefined

  /**
   * From now on, the first grant call that meets `trigger` is answered late: from then the link is `extraMs` slower
   * for `forMs`, that call's reply too. `reserve-drop`: a call Redis runs that lowers one of this process's reserves
   * to half or less (at least 3 units handed back), so the process goes into its outage with the call that lowered its
   * reserve in flight and applied (what the reserve cap is for: only the lower figure may be spent until the reply
   * says which). `backlog`: a call that carries at least `minRequests` requests (a backlog let go at once, as the
   * requests parked through an outage are when their shard answers again); `claim`, shared by the processes armed
   * together, is true for the first of them only (the backlog Redis runs first is the one slowed).
   */
  slowWhen (trigger: SlowTrigger, forMs: number, extraMs: number): void {
    this.armedSlow = { trigger, forMs, extraMs }
  }

  private reservesSeen (keys: readonly string[], reply: unknown): void {
    let dropped = false
    const fields = reply as number[]
    for (let entry = 0; 2 * entry < keys.length; entry++) {
      const reserve = fields[1 + entry * GRANT_REPLY_FIELDS + GRANT_REPLY_RESERVE]
      if (typeof reserve !== 'number') continue
      const before = this.reserves.get(keys[2 * entry]!) ?? 0
      if (before >= 3 && reserve <= before / 2) dropped = true
      this.reserves.set(keys[2 * entry]!, reserve)
    }
    const armed = this.armedSlow
    if (dropped && armed?.trigger.kind === 'reserve-drop') {
      this.armedSlow = undefined
      this.slow(armed.forMs, armed.extraMs)
    }
  }

  /**
   * A grant call ran at Redis at TIME `now` (the reply's first value), sent at `sentAt`: each request of a key it asks
   * requests for that arrived before it was sent, and no call carried yet, would have reached Redis at `now` less its
   * wait in this process (sentAt − arrived): its arrival plus the network's delay, without the limiter's own (a turn,
   * a call of its id in flight, a hold for the second's end).
   */
  private askedSeen (keys: readonly string[], args: readonly string[], reply: unknown, sentAt: number): void {
    const now = (reply as number[])[0]
    if (typeof now !== 'number') return
    for (let entry = 0; 2 * entry < keys.length; entry++) {
      if (requestsOf(args, entry) === 0) continue
      for (const asked of this.notYetAsked.get(keys[2 * entry]!) ?? []) {
        if (asked.reachedRedisAt === undefined && asked.arrived <= sentAt) asked.reachedRedisAt = now - (sentAt - asked.arrived)
      }
    }
  }

  /** An answered request leaves the list of those not yet asked (its key's list goes once empty). */
  private forgetAsked (key: string, asked: { readonly arrived: number }): void {
    const pending = this.notYetAsked.get(key)
    if (pending === undefined) return
    const index = pending.indexOf(asked)
    if (index >= 0) pending.splice(index, 1)
    if (pending.length === 0) this.notYetAsked.delete(key)
  }

  /** A grant call's arguments: fires a `backlog` trigger when the requests they ask for reach it. */
  private backlogSeen (args: readonly string[]): void {
    const armed = this.armedSlow
    if (armed?.trigger.kind !== 'backlog') return
    let requests = 0
    for (let entry = 0; 1 + 3 * entry < args.length; entry++) requests += requestsOf(args, entry)
    if (requests < armed.trigger.minRequests) return
    this.armedSlow = undefined
    if (armed.trigger.claim()) this.slow(armed.forMs, armed.extraMs)
  }

  /** A slow link: every message takes `ms` more until `until` (virtual ms). */
  private slowLink = { until: 0, ms: 0 }

  /** The link stays up but every message takes `extraMs` more, for `forMs` (congestion: calls outlive their budget). */
  slow (forMs: number, extraMs: number): void {
    this.slowLink = { until: this.world.now + forMs, ms: extraMs }
  }

  private delay (): number {
    const { net } = this.opts
    const slow = this.world.now < this.slowLink.until ? this.slowLink.ms : 0
    return slow + net.base + this.world.random() * net.jitter + (this.world.chance(net.slowChance) ? net.slowMs : 0)
  }

  private send (shard: string, command: () => unknown): Promise<unknown> {
    const link = this.links.get(shard)
    if (link === undefined || !link.up || this.dead) return Promise.reject(new Error('Connection is closed.'))
    // Bytes sent on a connection reach only the server that accepted it: a node killed meanwhile took the
    // connection with it, so its restarted incarnation never runs the command (ioredis does not resend it).
    const node = this.topology.node(shard)
    const incarnation = node.incarnation
    return new Promise((resolve, reject) => {
      const gen = link.gen
      const fail = (err: Error): void => { reject(err) }
      link.pending.add(fail)
      this.world.at(this.world.now + this.delay(), () => {
        if (node.incarnation !== incarnation) return
        node.arrive(() => {
          let reply: unknown
          let error: Error | undefined
          try {
            reply = command()
          } catch (err) {
            error = err as Error
          }
          link.lastReplyAt = Math.max(link.lastReplyAt, this.world.now + this.delay())
          this.world.at(link.lastReplyAt, () => {
            if (gen !== link.gen || !link.pending.delete(fail)) return
            if (error === undefined) resolve(reply)
            else reject(error)
          }, this, IO)
        })
      })
    })
  }

  private drop (link: Link): void {
    link.gen++
    const wasUp = link.up
    link.up = false
    const failures = [...link.pending]
    link.pending.clear()
    for (const fail of failures) fail(new Error('Connection is closed.'))
    if (wasUp) for (const l of this.listeners) l(link.shard, false)
  }

  private reconnectLater (link: Link, after = this.world.between(5, 500)): void {
    if (this.dead) return
    const gen = link.gen
    this.world.at(this.world.now + after, () => {
      if (gen !== link.gen || this.topology.node(link.shard).state === 'dead' || link.up) return
      link.up = true
      for (const l of this.listeners) l(link.shard, true)
    }, this, IO)
  }
}

/** One connection: to which node, whether it is up, its generation, when its last reply is read, its calls in flight. */
interface Link {
  readonly shard: string
  up: boolean
  gen: number
  lastReplyAt: number
  readonly pending: Set<(err: Error) => void>
}
